import type { IncomingMessage, ServerResponse } from "node:http";
import bytes from "bytes";
import express, { type Express, type Router } from "express";
import type { Logger } from "@platform/logging";
import { healthRoutes, type ReadinessCheck } from "./health";
import { createServiceListener, mountJsonRoute, type JsonRoute } from "./json-routes";
import { createMetrics, type Metrics } from "./metrics";
import { errorHandler, jsonBody, notFound, refuseNulInUrl, requestId, requireInternal } from "./middleware";

export interface ServiceAppOptions {
  service: string;
  log: Logger;
  internalToken: string;
  readiness: Record<string, ReadinessCheck>;
  /** Mounted after auth and body parsing; paths as the gateway forwards them (`/api/v1/...`, `/admin/v1/...`). */
  routes: Router;
  /** Routes answered with JSON, also served on the fast path (`createServiceListener`). */
  jsonRoutes?: JsonRoute[];
  /** Bodies of every route, inflated size (default 1 MB, the contract's limit). */
  bodyLimit?: string | number;
  /** The routes that take larger bodies (`/templates/send`: 16 MB) and their limit; every other route keeps `bodyLimit`. */
  largeBodies?: LargeBodies;
  metrics?: Metrics;
}

export interface LargeBodies {
  limit: string | number;
  method: string;
  /** Matched against the path as the gateway forwards it (`/api/v1/...`). */
  path: RegExp;
}

/** JSON bodies up to `bodyLimit`, and up to `largeBodies.limit` on its routes only (the limit is on the inflated body). */
function jsonBodies(opts: ServiceAppOptions) {
  const small = jsonBody(opts.bodyLimit ?? "1mb");
  const large = opts.largeBodies;
  if (!large) return small;
  const parseLarge = jsonBody(large.limit);
  return (req: express.Request, res: express.Response, next: express.NextFunction) =>
    (req.method === large.method && large.path.test(req.path) ? parseLarge : small)(req, res, next);
}

/**
 * The shape every internal service's express app shares: request ids,
 * probes and metrics without auth, then the internal token, JSON bodies,
 * the service's routes, a 404 envelope and the one error middleware.
 */
export function createServiceApp(opts: ServiceAppOptions): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "extended");
  const metrics = opts.metrics ?? createMetrics(opts.service);
  app.use(requestId(opts.log));
  app.use(healthRoutes(opts.readiness));
  app.use(metrics.router);
  app.use(metrics.middleware);
  app.use(requireInternal(opts.internalToken));
  app.use(refuseNulInUrl());
  app.use(jsonBodies(opts));
  if (opts.jsonRoutes?.length) {
    const json = express.Router();
    for (const route of opts.jsonRoutes) mountJsonRoute(json, route);
    app.use(json);
  }
  app.use(opts.routes);
  app.use(notFound());
  app.use(errorHandler(opts.log));
  return app;
}

/**
 * The service's HTTP request listener: the express app of `createServiceApp`,
 * behind the fast path for its JSON routes (ADR 0005).
 */
export function createServiceHandler(opts: ServiceAppOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const metrics = opts.metrics ?? createMetrics(opts.service);
  const app = createServiceApp({ ...opts, metrics });
  if (!opts.jsonRoutes?.length) return app;
  return createServiceListener({
    app,
    routes: opts.jsonRoutes,
    internalToken: opts.internalToken,
    bodyLimitBytes: bytes.parse(opts.bodyLimit ?? "1mb") ?? 1_048_576,
    metrics,
    log: opts.log,
  });
}
