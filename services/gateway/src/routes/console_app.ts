import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import express, { type RequestHandler, type Router } from "express";

/**
 * The console's page (issue 15): packages/console's Vite build, copied into dist/public/console at the gateway's
 * build (scripts/copy-console.js). Hashed files under /console/assets are cached for a year (immutable); every
 * other /console path is a client route and answers index.html (never cached, so a new build is picked up).
 * `/console/api/*` is the console's API and never falls back to the page.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** Where the built console is: the gateway's own dist/public/console, or (tests under ts-node, from src/) the package's dist. */
export function findConsoleDist(): string | undefined {
  const candidates = [join(__dirname, "..", "public", "console"), join(__dirname, "..", "..", "dist", "public", "console")];
  try {
    candidates.push(join(dirname(require.resolve("@platform/console/package.json")), "dist"));
  } catch {
    /* not installed (the image): only the copy counts */
  }
  return candidates.find((dir) => existsSync(join(dir, "index.html")));
}

const securityHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader("Content-Security-Policy", CONSOLE_CSP);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("X-Frame-Options", "DENY");
  res.setHeader("Referrer-Policy", "no-referrer");
  res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
  next();
};

export function registerConsoleApp(router: Router, dist = findConsoleDist()): void {
  if (!dist) return; // not built: /console answers the 404 envelope
  const index = readFileSync(join(dist, "index.html"));
  const page: RequestHandler = (req, res, next) => {
    if (req.path === "/console/api" || req.path.startsWith("/console/api/")) return next();
    res.setHeader("Cache-Control", "no-cache");
    res.type("html").send(index);
  };
  router.get("/console", (req, res, next) => {
    const q = req.originalUrl.indexOf("?");
    // Express matches `/console/` here too (non-strict routing): only the bare path redirects.
    if ((q >= 0 ? req.originalUrl.slice(0, q) : req.originalUrl) !== "/console") return next();
    res.redirect(308, `/console/${q >= 0 ? req.originalUrl.slice(q) : ""}`);
  });
  router.use(
    "/console/assets",
    securityHeaders,
    express.static(join(dist, "assets"), { immutable: true, maxAge: "365d", index: false, redirect: false, fallthrough: true }),
  );
  router.get(/^\/console\/(?!assets\/).*/, securityHeaders, page);
}
