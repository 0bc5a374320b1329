import type { Router } from "express";
import { organizationOf } from "@platform/http";
import type { WebhookAdmin } from "../use-cases/webhooks";

/** POST /admin/v1/organizations/:orgId/webhooks/:id/test → 200 `{delivered, responseStatus, durationMs}` after one attempt. */
export function registerTestWebhook(router: Router, admin: WebhookAdmin): void {
  router.post("/admin/v1/organizations/:orgId/webhooks/:id/test", async (req, res) => {
    const org = organizationOf(res);
    res.status(200).json(await admin.sendTest(org, req.params.id));
  });
}
