import type { Router } from "express";
import { organizationOf } from "@platform/http";
import type { MessagingContext } from "../context";
import { listChannels } from "../use-cases/channels";

/** GET /admin/v1/organizations/:orgId/channels → {items} (the Settings screen). */
export function adminChannelsList(router: Router, ctx: MessagingContext): void {
  router.get("/admin/v1/organizations/:orgId/channels", async (_req, res) => {
    res.json({ items: await listChannels(ctx, organizationOf(res)) });
  });
}
