import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Request, Response, Router } from "express";
import { buildOpenApiDocument } from "@platform/contracts";

/**
 * Scalar's configuration: no web fonts, telemetry, AI agent, MCP or hosted client, so nothing leaves for another host.
 * @scalar/api-reference stays on 1.46 (engines node >=20): 1.47 and later require Node 22, which the image and CI do not run.
 */
const SCALAR_CONFIGURATION = JSON.stringify({
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  agent: { disabled: true },
  mcp: { disabled: true },
  showDeveloperTools: "never",
  defaultOpenAllTags: true,
});

/** The reference page: Scalar's standalone bundle (served beside it) renders the served document. No inline script. */
const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Business Messaging API reference</title>
    <link rel="icon" href="data:," />
  </head>
  <body>
    <noscript>The API reference needs JavaScript; the document itself is at <a href="/api-reference/openapi.json">/api-reference/openapi.json</a>.</noscript>
    <script id="api-reference" data-url="/api-reference/openapi.json" data-configuration='${SCALAR_CONFIGURATION}'></script>
    <script src="/api-reference/api-reference.js"></script>
  </body>
</html>
`;

const BUNDLE_IN_PACKAGE = join("node_modules", "@scalar", "api-reference", "dist", "browser", "standalone.js");

/**
 * The bundle copied into dist/public at build (scripts/copy-api-reference.js); from src/ (tests under ts-node, no
 * build yet) the devDependency itself, found as node does, walking up to the workspace root.
 */
function loadBundle(): { raw: Buffer; gzip: Buffer } | undefined {
  const candidates = [join(__dirname, "..", "public", "api-reference.js"), join(__dirname, "..", "..", "dist", "public", "api-reference.js")];
  for (let dir = __dirname; ; dir = dirname(dir)) {
    candidates.push(join(dir, BUNDLE_IN_PACKAGE));
    if (dirname(dir) === dir) break;
  }
  const file = candidates.find((f) => existsSync(f));
  if (!file) return undefined;
  const raw = readFileSync(file);
  return { raw, gzip: gzipSync(raw) };
}

/** Public, no key: the OpenAPI document generated once from the contracts package at start, and its rendered page. */
export function registerOpenApi(router: Router): void {
  const body = JSON.stringify(buildOpenApiDocument());
  router.get("/api-reference/openapi.json", (_req, res) => {
    res.type("application/json").send(body);
  });

  router.get(["/api-reference", "/api-reference/"], (_req, res) => {
    res.setHeader("Cache-Control", "no-cache");
    res.type("html").send(PAGE);
  });

  let bundle: ReturnType<typeof loadBundle> | null = null;
  router.get("/api-reference/api-reference.js", (req: Request, res: Response, next) => {
    bundle ??= loadBundle();
    if (!bundle) return next(); // not built: the 404 envelope
    res.setHeader("Cache-Control", "public, max-age=3600");
    res.setHeader("Vary", "Accept-Encoding");
    res.type("text/javascript");
    if (/\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""))) {
      res.setHeader("Content-Encoding", "gzip");
      res.send(bundle.gzip);
    } else {
      res.send(bundle.raw);
    }
  });
}
