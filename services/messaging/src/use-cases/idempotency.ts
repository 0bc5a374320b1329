import { answerOf, ApiError, requestHash, type IdempotentAnswer } from "@platform/http";
import { newId } from "@platform/id";
import type { MessagingContext } from "../context";
import { idempotencyKeysRepository } from "../db/repositories/idempotency-keys.repository";

export type Answer = IdempotentAnswer;
export { requestHash } from "@platform/http";

/**
 * Runs `work` at most once per (organization, Idempotency-Key) within 24 h.
 * Same key and body: the first answer again (status included). Different
 * body: 422. Still running: 409. Answers of 5xx are not kept, so a retry after
 * an outage does the work.
 *
 * `work` creates the message with the id it is given, which the claim fixes.
 * A request whose process died leaves its claim `processing`; the next retry
 * after ABANDONED_AFTER_MS takes it over and first asks `recover` for that
 * message: if the dead request stored it, that message is the answer (the
 * stalled-send sweep sends it if it was not sent), never a second message.
 */
export async function withIdempotency(
  ctx: MessagingContext,
  organizationId: string,
  key: string | undefined,
  body: unknown,
  work: (messageId: string) => Promise<Answer>,
  recover: (messageId: string) => Promise<Answer | undefined>,
): Promise<Answer> {
  if (key === undefined) return answerOf(() => work(newId("message")));
  const hash = requestHash(body);
  const claim = await idempotencyKeysRepository.claim(ctx.db, organizationId, key, hash, newId("message"));
  if (!("messageId" in claim)) {
    if (claim.request_hash !== hash) {
      throw new ApiError("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body");
    }
    if (claim.state !== "done" || claim.response_status === null) {
      throw new ApiError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still being processed");
    }
    return { status: claim.response_status, body: claim.response_body, replayed: true };
  }
  let answer: Answer;
  try {
    const recovered = claim.takenOver ? await recover(claim.messageId) : undefined;
    answer = recovered ?? (await answerOf(() => work(claim.messageId)));
  } catch (err) {
    await idempotencyKeysRepository.release(ctx.db, organizationId, key).catch(() => undefined);
    throw err;
  }
  if (answer.status >= 500) await idempotencyKeysRepository.release(ctx.db, organizationId, key);
  else await idempotencyKeysRepository.complete(ctx.db, organizationId, key, answer.status, answer.body);
  return answer;
}

