import type { Router } from "express";

export function registerPing(router: Router): void {
  router.get("/api/v1/ping", (_req, res) => {
    res.json({ ok: true, organizationId: res.locals.organizationId as string });
  });
}
