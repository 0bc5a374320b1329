// Build step: copies Scalar's standalone browser bundle (a devDependency) into dist/public, so the
// gateway serves the API reference page offline, from the image, without the package's dependencies.
const fs = require("node:fs");
const path = require("node:path");

const rel = path.join("node_modules", "@scalar", "api-reference", "dist", "browser", "standalone.js");
let dir = path.resolve(__dirname, "..");
let source;
for (;;) {
  const candidate = path.join(dir, rel);
  if (fs.existsSync(candidate)) {
    source = candidate;
    break;
  }
  const parent = path.dirname(dir);
  if (parent === dir) throw new Error(`${rel} not found: run npm install`);
  dir = parent;
}
const out = path.resolve(__dirname, "..", "dist", "public");
fs.mkdirSync(out, { recursive: true });
fs.copyFileSync(source, path.join(out, "api-reference.js"));
