import type { RequestHandler, Router } from "express";
import express from "express";
import client from "prom-client";

/** One Prometheus registry per process, with default Node metrics and the service label. */
export function createMetrics(service: string) {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service });
  client.collectDefaultMetrics({ register: registry });
  const httpDuration = new client.Histogram({
    name: "http_request_duration_seconds",
    help: "HTTP request duration by route and status",
    labelNames: ["method", "route", "status"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });

  const middleware: RequestHandler = (req, res, next) => {
    const end = httpDuration.startTimer();
    res.on("finish", () => {
      // The matched route pattern keeps label cardinality bounded; unmatched paths share one label.
      const route = (req.route?.path as string | undefined) ?? (res.statusCode === 404 ? "unmatched" : req.baseUrl || "other");
      end({ method: req.method, route: String(route), status: String(res.statusCode) });
    });
    next();
  };

  const router: Router = express.Router();
  router.get("/metrics", async (_req, res) => {
    res.setHeader("Content-Type", registry.contentType);
    res.send(await registry.metrics());
  });

  /** The same histogram for handlers outside express (the gateway's /api/v1 front): call when the request starts. */
  const track = (method: string, res: { statusCode: number; on(event: "finish", cb: () => void): unknown }, route: () => string) => {
    const end = httpDuration.startTimer();
    res.on("finish", () => end({ method, route: route(), status: String(res.statusCode) }));
  };

  return { registry, middleware, router, client, track };
}
export type Metrics = ReturnType<typeof createMetrics>;
