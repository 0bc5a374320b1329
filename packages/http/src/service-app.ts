import express, { type Express, type Router } from "express";
import type { Logger } from "@platform/logging";
import { healthRoutes, type ReadinessCheck } from "./health";
import { createMetrics, type Metrics } from "./metrics";
import { errorHandler, jsonBody, notFound, refuseNulInUrl, requestId, requireInternal } from "./middleware";

export interface ServiceAppOptions {
  service: string;
  log: Logger;
  internalToken: string;
  readiness: Record<string, ReadinessCheck>;
  /** Mounted after auth and body parsing; paths as the gateway forwards them (`/api/v1/...`, `/admin/v1/...`). */
  routes: Router;
  bodyLimit?: string | number;
  metrics?: Metrics;
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
  app.use(requestId());
  app.use(healthRoutes(opts.readiness));
  app.use(metrics.router);
  app.use(metrics.middleware);
  app.use(requireInternal(opts.internalToken));
  app.use(refuseNulInUrl());
  app.use(jsonBody(opts.bodyLimit ?? "1mb"));
  app.use(opts.routes);
  app.use(notFound());
  app.use(errorHandler(opts.log));
  return app;
}
