import type { Router } from "express";
import { UpdateWebhookRequest } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { WebhookAdmin } from "../use-cases/webhooks";

/** PATCH /admin/v1/organizations/:orgId/webhooks/:id: url, events, active (`true` re-enables and resets the count). */
export function registerUpdateWebhook(router: Router, admin: WebhookAdmin): void {
  router.patch("/admin/v1/organizations/:orgId/webhooks/:id", async (req, res) => {
    const org = organizationOf(res);
    const body = parseBody(UpdateWebhookRequest, req);
    res.json(await admin.update(org, req.params.id, body));
  });
}
