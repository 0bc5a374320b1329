import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { CursorCodec, organizationOf, parseQuery } from "@platform/http";
import type { MessagingContext } from "../context";
import { listChannels, type ChannelCursor } from "../use-cases/channels";

/** GET /admin/v1/organizations/:orgId/channels → {items, nextCursor?} in creation order (the Settings screen). */
export function adminChannelsList(router: Router, ctx: MessagingContext): void {
  // Cursors are signed with a key every replica shares.
  const cursors = new CursorCodec<ChannelCursor>(`channels:${ctx.env.INTERNAL_TOKEN}`, "channels");
  router.get("/admin/v1/organizations/:orgId/channels", async (req, res) => {
    res.json(await listChannels(ctx, cursors, organizationOf(res), parseQuery(PageQuery, req)));
  });
}
