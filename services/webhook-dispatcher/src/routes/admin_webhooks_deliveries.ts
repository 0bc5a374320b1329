import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { WebhookAdmin } from "../use-cases/webhooks";

/** GET /admin/v1/organizations/:orgId/webhooks/:id/deliveries → the attempt log, newest first. */
export function registerListDeliveries(router: Router, admin: WebhookAdmin): void {
  router.get("/admin/v1/organizations/:orgId/webhooks/:id/deliveries", async (req, res) => {
    const org = organizationOf(res);
    res.json(await admin.listDeliveries(org, req.params.id, parseQuery(PageQuery, req)));
  });
}
