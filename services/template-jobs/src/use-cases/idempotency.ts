import { answerOf, ApiError, requestHash, type IdempotentAnswer } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import type { Queryable } from "../db/repositories/queryable";
import { idempotencyKeysRepository } from "../db/repositories/idempotency-keys.repository";

export type Answer = IdempotentAnswer;
export { requestHash } from "@platform/http";

/**
 * Runs `work` at most once per (organization, Idempotency-Key) within 24 h.
 * Same key and body: the first answer again (status included). Different
 * body: 422. Still running: 409. Answers of 5xx are not kept, so a retry after
 * an outage does the work.
 */
export async function withIdempotency(
  ctx: TemplateJobsContext,
  organizationId: string,
  key: string | undefined,
  body: unknown,
  work: (completeWith?: (q: Queryable, answer: Answer) => Promise<void>) => Promise<Answer>,
): Promise<Answer> {
  if (key === undefined) return answerOf(() => work());
  const hash = requestHash(body);
  const existing = await idempotencyKeysRepository.claim(ctx.db, organizationId, key, hash);
  if (existing) {
    if (existing.request_hash !== hash) {
      throw new ApiError("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body");
    }
    if (existing.state !== "done" || existing.response_status === null) {
      throw new ApiError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still being processed");
    }
    return { status: existing.response_status, body: existing.response_body, replayed: true };
  }
  let answer: Answer;
  let completed = false;
  // The work may complete the key in its own transaction (the job and its answer commit together): a process that
  // dies right after that commit leaves a replayable answer, never a claim whose takeover would create a second job.
  const completeWith = async (q: Queryable, a: Answer) => {
    await idempotencyKeysRepository.complete(q, organizationId, key, a.status, a.body);
    completed = true;
  };
  try {
    answer = await answerOf(() => work(completeWith));
  } catch (err) {
    await idempotencyKeysRepository.release(ctx.db, organizationId, key).catch(() => undefined);
    throw err;
  }
  if (answer.status >= 500) await idempotencyKeysRepository.release(ctx.db, organizationId, key);
  else if (!completed) await idempotencyKeysRepository.complete(ctx.db, organizationId, key, answer.status, answer.body);
  return answer;
}

