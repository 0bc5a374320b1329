import type { z } from "zod";
import { enqueue } from "@platform/bus";
import type { ConversationList, PageQuery } from "@platform/contracts";
import { positionIn, type CursorCodec, type OrganizationPosition } from "@platform/http";
import type { MessagingContext } from "../context";
import { conversationsRepository, toConversation } from "../db/repositories/conversations.repository";
import { conversationEvent } from "./events";

/** Position after a conversation, bound to the organization it was issued to (another one's list refuses it). */
export type ConversationCursor = OrganizationPosition;

/** GET /api/v1/conversations: ordered by createdAt then id; the cursor is the last item's position. */
export async function listConversations(
  ctx: MessagingContext,
  cursors: CursorCodec<ConversationCursor>,
  organizationId: string,
  query: PageQuery,
): Promise<z.infer<typeof ConversationList>> {
  const after = query.cursor !== undefined ? cursors.decode(query.cursor, positionIn(organizationId)) : undefined;
  const rows = await conversationsRepository.page(ctx.db, organizationId, query.limit + 1, after);
  const items = rows.slice(0, query.limit).map(toConversation);
  if (rows.length <= query.limit) return { items };
  const last = items[items.length - 1];
  return { items, nextCursor: cursors.encode({ o: organizationId, createdAt: last.createdAt, id: last.id }) };
}

/** Closes idle conversations in batches, each batch with its `conversation.closed` events. Returns how many closed. */
export async function closeIdleConversations(ctx: MessagingContext, batchSize = 500): Promise<number> {
  let total = 0;
  for (;;) {
    const { closed, candidates } = await ctx.db.transaction(async (tx) => {
      const step = await conversationsRepository.closeIdle(tx, ctx.env.CONVERSATION_IDLE_TIMEOUT_MS, batchSize);
      await enqueue(tx, "messaging", step.closed.map((r) => conversationEvent(r, "conversation.closed")));
      return step;
    });
    total += closed.length;
    // A step of candidates that were all still active closes none, but more may be behind them.
    if (candidates < batchSize) return total;
  }
}
