import type { Router } from "express";
import { CreateWebhookRequest } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { WebhookAdmin } from "../use-cases/webhooks";

/** POST /admin/v1/organizations/:orgId/webhooks → 201, the secret shown this once. */
export function registerCreateWebhook(router: Router, admin: WebhookAdmin): void {
  router.post("/admin/v1/organizations/:orgId/webhooks", async (req, res) => {
    const org = organizationOf(res);
    const body = parseBody(CreateWebhookRequest, req);
    res.status(201).json(await admin.create(org, body));
  });
}
