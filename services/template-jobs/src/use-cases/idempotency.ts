import { createHash } from "node:crypto";
import { ApiError } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import type { Queryable } from "../db/repositories/queryable";
import { idempotencyKeysRepository } from "../db/repositories/idempotency-keys.repository";

export interface Answer {
  status: number;
  body: unknown;
  replayed?: boolean;
}

/** Key order does not change a JSON body's meaning, so it does not change its hash either. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export const requestHash = (body: unknown) => createHash("sha256").update(canonical(body)).digest("hex");

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
  if (key === undefined) return runToAnswer(() => work());
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
    answer = await runToAnswer(() => work(completeWith));
  } catch (err) {
    await idempotencyKeysRepository.release(ctx.db, organizationId, key).catch(() => undefined);
    throw err;
  }
  if (answer.status >= 500) await idempotencyKeysRepository.release(ctx.db, organizationId, key);
  else if (!completed) await idempotencyKeysRepository.complete(ctx.db, organizationId, key, answer.status, answer.body);
  return answer;
}

/** The work's answer, with an ApiError turned into its envelope so it can be stored and replayed. */
async function runToAnswer(work: () => Promise<Answer>): Promise<Answer> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, body: err.toJSON() };
    throw err;
  }
}
