import { sleep } from "@platform/runtime";
import { run, SCHEMA, type Queryable } from "../db/repositories/queryable";

/** How long a `130429` answer halves the channel's rate. */
export const SLOWDOWN_MS = 60_000;

/**
 * Per-channel pacing shared by every replica and by template jobs
 * (docs/adr/0003-channel-pacing.md): GCRA in one SQL statement on one row per
 * channel. A reservation of `n` slots takes the next `n` emission intervals
 * (1 / messagesPerSecond each, doubled while the channel is slowed down)
 * from `max(tat, now)` and moves `tat` past them. No burst tolerance: the
 * provider's limit is per second, and the slots are exactly that.
 *
 * Returns the first slot's offset from now and the interval, in ms.
 */
export async function reservePacingSlots(q: Queryable, channelId: string, n = 1): Promise<{ firstInMs: number; intervalMs: number } | undefined> {
  const rows = await run<{ end_ms: number; interval_ms: number }>(
    q,
    `WITH t AS (SELECT clock_timestamp() AS now)
     UPDATE ${SCHEMA}.channel_pacing p
     SET tat = greatest(p.tat, t.now) + $2 * (CASE WHEN p.slowed_until > t.now THEN 2.0 ELSE 1.0 END / p.messages_per_second) * interval '1 second'
     FROM t WHERE p.channel_id = $1
     RETURNING (extract(epoch FROM (p.tat - t.now)) * 1000)::float8 AS end_ms,
       (CASE WHEN p.slowed_until > t.now THEN 2000.0 ELSE 1000.0 END / p.messages_per_second)::float8 AS interval_ms`,
    [channelId, n],
  );
  if (!rows[0]) return undefined;
  return { firstInMs: rows[0].end_ms - n * rows[0].interval_ms, intervalMs: rows[0].interval_ms };
}

/** One slot: how long to wait before calling the provider (0 when the slot is now). */
export async function reservePacingSlot(q: Queryable, channelId: string): Promise<number> {
  const r = await reservePacingSlots(q, channelId, 1);
  return r ? Math.max(0, r.firstInMs) : 0;
}

/** Reserves a slot and waits for it. */
export async function takePacingToken(q: Queryable, channelId: string): Promise<void> {
  const waitMs = await reservePacingSlot(q, channelId);
  if (waitMs > 0) await sleep(waitMs);
}

/** The provider said "too fast" (130429): halve the channel's rate for a while, and push its next slot out a little. */
export async function slowDownChannel(q: Queryable, channelId: string): Promise<void> {
  await run(
    q,
    `UPDATE ${SCHEMA}.channel_pacing SET slowed_until = clock_timestamp() + $2 * interval '1 millisecond',
       tat = greatest(tat, clock_timestamp()) + interval '1 second' / messages_per_second * 10
     WHERE channel_id = $1`,
    [channelId, SLOWDOWN_MS],
  );
}

/** A slot older than this is not used: a late send on an old slot could add to a later second's budget. */
const STALE_SLOT_MS = 2;
/** Slots fetched per round trip cover about this much time (never more than BLOCK_MAX slots). */
const BLOCK_SPAN_MS = 20;
const BLOCK_MAX = 50;

interface Block {
  /** Local epoch ms of slot 0. */
  start: number;
  intervalMs: number;
  count: number;
  used: number;
}

/**
 * The request path's pacer: the same GCRA row, but a busy channel reserves a
 * block of consecutive slots (about 20 ms of its budget) per round trip and
 * hands them out in this process. Blocks are exclusive intervals of the
 * channel's timeline, so replicas together still never exceed the rate;
 * slots nobody used in time are dropped, never spent late.
 */
export class ChannelPacer {
  private readonly blocks = new Map<string, Block>();
  private readonly fetching = new Map<string, Promise<void>>();

  constructor(private readonly q: Queryable) {}

  /** Reserves one slot; resolves with how long to wait for it (ms). */
  async reserve(channelId: string, messagesPerSecond: number): Promise<number> {
    for (let round = 0; round < 5; round++) {
      const now = Date.now();
      const block = this.blocks.get(channelId);
      if (block) {
        // Skip stale slots, then take the next one.
        const fresh = block.intervalMs > 0 ? Math.max(block.used, Math.ceil((now - STALE_SLOT_MS - block.start) / block.intervalMs)) : block.used;
        if (fresh < block.count) {
          block.used = fresh + 1;
          return Math.max(0, block.start + fresh * block.intervalMs - now);
        }
      }
      let pending = this.fetching.get(channelId);
      if (!pending) {
        pending = this.fetchBlock(channelId, messagesPerSecond).finally(() => this.fetching.delete(channelId));
        this.fetching.set(channelId, pending);
      }
      await pending;
    }
    // Unlikely (blocks consumed by others five times in a row): one slot of our own.
    return reservePacingSlot(this.q, channelId);
  }

  /** After a 130429, forget local slots so the halved rate applies at once. */
  forget(channelId: string): void {
    this.blocks.delete(channelId);
  }

  private async fetchBlock(channelId: string, messagesPerSecond: number): Promise<void> {
    const n = Math.max(1, Math.min(BLOCK_MAX, Math.floor((messagesPerSecond * BLOCK_SPAN_MS) / 1000)));
    const before = Date.now();
    const r = await reservePacingSlots(this.q, channelId, n);
    if (!r) {
      this.blocks.set(channelId, { start: before, intervalMs: 0, count: 1, used: 0 });
      return;
    }
    this.blocks.set(channelId, { start: before + r.firstInMs, intervalMs: r.intervalMs, count: n, used: 0 });
  }
}
