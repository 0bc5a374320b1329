import type { TemplateJobsContext } from "../context";
import { idempotencyKeysRepository } from "../db/repositories/idempotency-keys.repository";

/** Deletes expired `Idempotency-Key` rows (24 h) in small batches, every few minutes; any replica may do it. */
export function startIdempotencySweeper(ctx: TemplateJobsContext, everyMs = 5 * 60_000): () => void {
  const timer = setInterval(() => {
    void (async () => {
      try {
        while ((await idempotencyKeysRepository.purgeExpired(ctx.db, 1_000)) === 1_000);
      } catch (err) {
        ctx.log.warn({ err: (err as Error).message }, "idempotency key purge failed");
      }
    })();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
