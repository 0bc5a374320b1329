import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { WebhookAdmin } from "../use-cases/webhooks";

/** GET /admin/v1/organizations/:orgId/webhooks → `{items, nextCursor?}` in creation order, secrets never included. */
export function registerListWebhooks(router: Router, admin: WebhookAdmin): void {
  router.get("/admin/v1/organizations/:orgId/webhooks", async (req, res) => {
    const org = organizationOf(res);
    res.json(await admin.list(org, parseQuery(PageQuery, req)));
  });
}
