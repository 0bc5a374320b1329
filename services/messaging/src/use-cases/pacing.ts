import { Batcher, sleep } from "@platform/runtime";
import { run, runPrepared, SCHEMA, type Queryable } from "../db/repositories/queryable";

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
 * Returns the first slot's offset from now and the interval, in ms; and, on
 * the database clock (epoch ms), the first slot's start and `now`, the
 * instant the reservation was decided (for tests: what the pacer decided).
 */
export async function reservePacingSlots(
  q: Queryable,
  channelId: string,
  n = 1,
): Promise<{ firstInMs: number; intervalMs: number; firstAt: number; decidedAt: number } | undefined> {
  const rows = await runPrepared<{ end_ms: number; interval_ms: number; end_at: number; now_at: number }>(
    q,
    "reservePacingSlots",
    `WITH t AS (SELECT clock_timestamp() AS now)
     UPDATE ${SCHEMA}.channel_pacing p
     SET tat = greatest(p.tat, t.now) + $2 * (CASE WHEN p.slowed_until > t.now THEN 2.0 ELSE 1.0 END / p.messages_per_second) * interval '1 second'
     FROM t WHERE p.channel_id = $1
     RETURNING (extract(epoch FROM (p.tat - t.now)) * 1000)::float8 AS end_ms,
       (CASE WHEN p.slowed_until > t.now THEN 2000.0 ELSE 1000.0 END / p.messages_per_second)::float8 AS interval_ms,
       (extract(epoch FROM p.tat) * 1000)::float8 AS end_at, (extract(epoch FROM t.now) * 1000)::float8 AS now_at`,
    [channelId, n],
  );
  if (!rows[0]) return undefined;
  const { end_ms: endMs, interval_ms: intervalMs, end_at: endAt, now_at: decidedAt } = rows[0];
  return { firstInMs: endMs - n * intervalMs, intervalMs, firstAt: endAt - n * intervalMs, decidedAt };
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

/**
 * The request path's pacer: the same GCRA row, with the reservations of
 * concurrent sends on one channel coalesced (`Batcher`). While one round trip
 * is in flight, new requests queue; the next round trip reserves exactly as
 * many consecutive slots as are waiting and hands them out in order. A quiet
 * channel costs one round trip per send with no wait; a busy one, one round
 * trip per batch. Slots are never reserved ahead of demand, so none are
 * wasted, and replicas together never exceed the rate.
 */
export class ChannelPacer {
  private readonly batcher: Batcher<null, { waitMs: number; slotAt: number | undefined }>;

  constructor(q: Queryable) {
    this.batcher = new Batcher(async (channelId, items) => {
      const before = Date.now();
      const r = await reservePacingSlots(q, channelId, items.length);
      const elapsed = Date.now() - before;
      return items.map((_, i) => ({
        waitMs: r ? Math.max(0, r.firstInMs + i * r.intervalMs - elapsed) : 0,
        slotAt: r ? r.firstAt + i * r.intervalMs : undefined,
      }));
    }, 200);
  }

  /** Round trips made (for tests and metrics). */
  get roundTrips(): number {
    return this.batcher.batches;
  }

  /** Reserves one slot; resolves with how long to wait for it (ms). */
  reserve(channelId: string): Promise<number> {
    return this.reserveSlot(channelId).then((s) => s.waitMs);
  }

  /** Reserves one slot; resolves with how long to wait for it (ms) and the slot's start on the database clock (epoch ms; undefined without a pacing row). */
  reserveSlot(channelId: string): Promise<{ waitMs: number; slotAt: number | undefined }> {
    return this.batcher.submit(channelId, null);
  }
}
