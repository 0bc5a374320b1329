import { IdempotencyKey, SendMessageRequest } from "@platform/contracts";
import { headerOf, organizationFrom, parseBody, parseValue, refusePlanRefused, type JsonRoute } from "@platform/http";
import type { MessagingContext } from "../context";
import { withIdempotency } from "../use-cases/idempotency";
import { sendMessage, takeOverStoredSend } from "../use-cases/send-message";

/** POST /api/v1/messages (with optional `Idempotency-Key`): the send path's hot route, so a JSON route (fast path). */
export function v1MessagesSend(ctx: MessagingContext): JsonRoute {
  return {
    method: "POST",
    path: "/api/v1/messages",
    async handler(req) {
      const organizationId = organizationFrom(req);
      const rawKey = headerOf(req, "idempotency-key");
      const key = rawKey === undefined ? undefined : parseValue(IdempotencyKey, rawKey, "headers.Idempotency-Key");
      const answer = await withIdempotency(
        ctx,
        organizationId,
        key,
        req.body ?? null,
        // Without a key, a caller that left is sent nothing: it was told nothing (503 at the gateway) and will retry.
        // With one, its retry finds this request's message and answers it, so the send goes on.
        (messageId) => {
          refusePlanRefused(req.headers);
          return sendMessage(ctx, organizationId, parseBody(SendMessageRequest, req), messageId, key === undefined ? req.abandoned : undefined);
        },
        (messageId) => takeOverStoredSend(ctx, organizationId, messageId),
      );
      return { status: answer.status, body: answer.body, headers: answer.replayed ? { "Idempotent-Replayed": "true" } : undefined };
    },
  };
}
