// Build step: copies the console's Vite build (packages/console/dist, a devDependency built first by turbo) into
// dist/public/console, so the gateway serves /console from its own files, offline, in the image too.
const fs = require("node:fs");
const path = require("node:path");

const source = path.join(path.dirname(require.resolve("@platform/console/package.json")), "dist");
if (!fs.existsSync(path.join(source, "index.html"))) throw new Error(`${source}/index.html not found: build @platform/console first`);
const out = path.resolve(__dirname, "..", "dist", "public", "console");
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.cpSync(source, out, { recursive: true });
