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

/** Text handed to the hash this many characters at a time: the canonical form is never held whole. */
const HASH_CHUNK = 64 * 1024;

/**
 * Writes `value`'s canonical JSON into `out`: objects with their keys sorted (key order does not change a JSON body's
 * meaning, so it does not change its hash either; bodies nest at most MAX_JSON_DEPTH), nothing else changed.
 */
function writeCanonical(value: unknown, out: (text: string) => void): void {
  if (Array.isArray(value)) {
    out("[");
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out(",");
      writeCanonical(value[i], out);
    }
    out("]");
    return;
  }
  if (value && typeof value === "object") {
    const keys = Object.keys(value as object).sort();
    out("{");
    for (let i = 0; i < keys.length; i++) {
      out(`${i > 0 ? "," : ""}${JSON.stringify(keys[i])}:`);
      writeCanonical((value as Record<string, unknown>)[keys[i]], out);
    }
    out("}");
    return;
  }
  out(JSON.stringify(value) ?? "null");
}

/**
 * The hash a repeated request must match to be a replay: the same body, whatever its key order. The canonical text
 * goes into the hash in chunks as it is written: for a 16 MB bulk send, building it whole (and the arrays of its
 * pieces) took tens of megabytes on top of the parsed body, near a service's 128 MB heap.
 */
export function requestHash(body: unknown): string {
  const hash = createHash("sha256");
  let pending = "";
  writeCanonical(body, (text) => {
    pending += text;
    if (pending.length >= HASH_CHUNK) {
      hash.update(pending);
      pending = "";
    }
  });
  return hash.update(pending).digest("hex");
}

/** The work's answer, with an ApiError turned into its envelope so it can be stored and replayed. */
export async function answerOf(work: () => Promise<IdempotentAnswer>): Promise<IdempotentAnswer> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, body: err.toJSON() };
    throw err;
  }
}
