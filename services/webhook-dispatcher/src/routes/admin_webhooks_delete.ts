import type { Router } from "express";
import { organizationOf } from "@platform/http";
import type { WebhookAdmin } from "../use-cases/webhooks";

/** DELETE /admin/v1/organizations/:orgId/webhooks/:id → 204; its pending deliveries and log go with it. */
export function registerDeleteWebhook(router: Router, admin: WebhookAdmin): void {
  router.delete("/admin/v1/organizations/:orgId/webhooks/:id", async (req, res) => {
    const org = organizationOf(res);
    await admin.remove(org, req.params.id);
    res.status(204).end();
  });
}
