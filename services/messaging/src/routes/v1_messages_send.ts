import type { Router } from "express";
import { IdempotencyKey, SendMessageRequest } from "@platform/contracts";
import { organizationOf, parseBody, parseValue } from "@platform/http";
import type { MessagingContext } from "../context";
import { withIdempotency } from "../use-cases/idempotency";
import { sendMessage } from "../use-cases/send-message";

/** POST /api/v1/messages (with optional `Idempotency-Key`). */
export function v1MessagesSend(router: Router, ctx: MessagingContext): void {
  router.post("/api/v1/messages", async (req, res) => {
    const organizationId = organizationOf(res);
    const rawKey = req.header("idempotency-key");
    const key = rawKey === undefined ? undefined : parseValue(IdempotencyKey, rawKey, "headers.Idempotency-Key");
    const answer = await withIdempotency(ctx, organizationId, key, req.body ?? null, async () =>
      sendMessage(ctx, organizationId, parseBody(SendMessageRequest, req)),
    );
    if (answer.replayed) res.setHeader("Idempotent-Replayed", "true");
    res.status(answer.status).json(answer.body);
  });
}
