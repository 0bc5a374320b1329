import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { CursorCodec, organizationOf, parseQuery } from "@platform/http";
import type { MessagingContext } from "../context";
import { listConversations, type ConversationCursor } from "../use-cases/conversations";

/** GET /api/v1/conversations: cursor pagination like every list. */
export function v1ConversationsList(router: Router, ctx: MessagingContext): void {
  // Cursors are signed with a key every replica shares.
  const cursors = new CursorCodec<ConversationCursor>(`conversations:${ctx.env.INTERNAL_TOKEN}`, "conversations");
  router.get("/api/v1/conversations", async (req, res) => {
    const organizationId = organizationOf(res);
    res.json(await listConversations(ctx, cursors, organizationId, parseQuery(PageQuery, req)));
  });
}
