import type { MessagingContext } from "../context";
import { closeIdleConversations } from "../use-cases/conversations";
import { idempotencyKeysRepository } from "../db/repositories/idempotency-keys.repository";
import { findStalledPending } from "../db/repositories/messages.repository";
import { enqueue } from "@platform/bus";
import { sendWorkItem } from "../use-cases/deliver";

/**
 * A pending message this long past its lease and its retry time has nobody
 * working on it: its sender died before the provider answered (the request
 * path enqueues no work item while it holds the lease), or its work item was
 * lost. The sweep hands it to the retry worker.
 */
const STALLED_GRACE_MS = 3_000;

/** Re-enqueues work items of stalled pending messages (deduplicated on the bus by attempt number). */
async function requeueStalled(ctx: MessagingContext): Promise<void> {
  const stalled = await findStalledPending(ctx.db, STALLED_GRACE_MS, 500);
  if (stalled.length === 0) return;
  ctx.log.info({ count: stalled.length }, "re-queueing stalled pending messages");
  await ctx.db.transaction((tx) =>
    enqueue(tx, "messaging", stalled.map((m) => ({ ...sendWorkItem(m, m.attempts), msgId: `send:${m.id}:recover:${m.attempts}` }))),
  );
}

/**
 * Closes idle conversations, re-queues stalled sends and purges expired idempotency keys. Every
 * replica runs it; `FOR UPDATE SKIP LOCKED` keeps them from closing one
 * conversation twice. The period follows the idle timeout (at most 1 s when
 * the timeout is short, as in tests).
 */
export function startSweeper(ctx: MessagingContext): () => Promise<void> {
  const periodMs = Math.max(200, Math.min(30_000, Math.floor(ctx.env.CONVERSATION_IDLE_TIMEOUT_MS / 4), 1_000));
  let running: Promise<void> | undefined;
  let ticks = 0;
  const timer = setInterval(() => {
    if (running) return;
    running = (async () => {
      try {
        const closed = await closeIdleConversations(ctx);
        if (closed > 0) ctx.log.info({ closed }, "idle conversations closed");
        ticks++;
        if (ticks % 2 === 0) await requeueStalled(ctx);
        if (ticks % 60 === 0) await idempotencyKeysRepository.purgeExpired(ctx.db);
      } catch (err) {
        ctx.log.warn({ err: (err as Error).message }, "conversation sweep failed");
      }
    })().finally(() => {
      running = undefined;
    });
  }, periodMs);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
