import { createHash } from "node:crypto";
import { ApiError } from "./errors";

/**
 * Pieces of `Idempotency-Key` handling every service with keyed sends shares
 * (messaging, template-jobs); each keeps its claims in its own schema.
 */

/** An answer as stored for replay: status, body, and whether this is a replay. */
export interface IdempotentAnswer {
  status: number;
  body: unknown;
  replayed?: boolean;
}

/** Key order does not change a JSON body's meaning, so it does not change its hash either (bodies nest at most MAX_JSON_DEPTH). */
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

/** The hash a repeated request must match to be a replay: the same body, whatever its key order. */
export const requestHash = (body: unknown) => createHash("sha256").update(canonical(body)).digest("hex");

/** The work's answer, with an ApiError turned into its envelope so it can be stored and replayed. */
export async function answerOf(work: () => Promise<IdempotentAnswer>): Promise<IdempotentAnswer> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, body: err.toJSON() };
    throw err;
  }
}
