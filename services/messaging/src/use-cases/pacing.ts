import { Batcher, sleep } from "@platform/runtime";
import { ADAPTIVE_PACING, currentRateSql } from "../db/repositories/pacing-rate";
import { run, runPrepared, SCHEMA, type Queryable } from "../db/repositories/queryable";

export { ADAPTIVE_PACING } from "../db/repositories/pacing-rate";

/**
 * Per-channel pacing shared by every replica and by template jobs
 * (docs/adr/0003-channel-pacing.md): GCRA in one SQL statement on one row per
 * channel. A reservation of `n` slots takes the next `n` emission intervals
 * (1 / the channel's current rate each: messagesPerSecond, or less for a
 * while after a 130429, see `slowDownChannel`)
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
     SET tat = greatest(p.tat, t.now) + $2 * (1.0 / ${currentRateSql("p", "t.now")}) * interval '1 second'
     FROM t WHERE p.channel_id = $1
     RETURNING (extract(epoch FROM (p.tat - t.now)) * 1000)::float8 AS end_ms,
       (1000.0 / ${currentRateSql("p", "t.now")})::float8 AS interval_ms,
       (extract(epoch FROM p.tat) * 1000)::float8 AS end_at, (extract(epoch FROM t.now) * 1000)::float8 AS now_at`,
    [channelId, n],
  );
  if (!rows[0]) return undefined;
  const { end_ms: endMs, interval_ms: intervalMs, end_at: endAt, now_at: decidedAt } = rows[0];
  return { firstInMs: endMs - n * intervalMs, intervalMs, firstAt: endAt - n * intervalMs, decidedAt };
}

/**
 * How far past now bulk (template) reservations may push the channel's `tat`.
 * A single send reserves normally, from `max(tat, now)`, so it never queues
 * behind more than this much of bulk slots (plus one interval), and on the
 * replica holding those bulk slots it takes the earliest of them instead
 * (`BulkPacer.yieldTo`): bulk sends yield to single sends (ADR 0003, "Sharing
 * the rate"). Wide enough that the reservation loop, asking again when half of
 * it is left, does not leave the channel idle when its process is late by a
 * few tens of milliseconds (20 ms lost about a third of the channel's time on
 * a busy machine).
 */
export const BULK_HORIZON_MS = 100;

export interface BulkReservation {
  /** Slots granted (0 when the horizon is full). */
  granted: number;
  /** Offset of the first granted slot from now (ms). */
  firstInMs: number;
  intervalMs: number;
  /** When to ask again for the rest: the horizon will have room for about half its width (ms from now). */
  retryInMs: number;
  /** How far the channel's timeline had fallen behind now when asked (ms; 0 when `tat` was ahead): time nobody sent in. */
  idleMs: number;
}

/**
 * Bulk reservation: up to `n` consecutive slots, but only those that start no
 * later than `now + horizonMs` (at least one when the next slot is within the
 * horizon, so a channel slower than one slot per horizon still moves). The
 * caller waits `retryInMs` and asks again for the rest. Same row, same
 * interval as single sends: the channel's total never exceeds its rate.
 */
export async function reserveBulkPacingSlots(q: Queryable, channelId: string, n: number, horizonMs = BULK_HORIZON_MS): Promise<BulkReservation | undefined> {
  const rows = await runPrepared<{ granted: number; first_ms: number; interval_ms: number; end_ms: number; idle_ms: number }>(
    q,
    "reserveBulkPacingSlots",
    `WITH t AS (SELECT clock_timestamp() AS now
     ), cur AS (
       SELECT p.channel_id, t.now, greatest(p.tat, t.now) AS start, greatest(0, extract(epoch FROM (t.now - p.tat)) * 1000)::float8 AS idle_ms,
         (1.0 / ${currentRateSql("p", "t.now")})::float8 AS interval_s
       FROM ${SCHEMA}.channel_pacing p, t WHERE p.channel_id = $1 FOR UPDATE OF p
     ), k AS (
       SELECT cur.*, least($2::int, greatest(0, floor(($3::float8 / 1000 - extract(epoch FROM (start - now))) / interval_s)::int + 1)) AS k FROM cur
     )
     UPDATE ${SCHEMA}.channel_pacing p SET tat = k.start + k.k * k.interval_s * interval '1 second'
     FROM k WHERE p.channel_id = k.channel_id
     RETURNING k.k AS granted, (extract(epoch FROM (k.start - k.now)) * 1000)::float8 AS first_ms, (k.interval_s * 1000)::float8 AS interval_ms,
       (extract(epoch FROM (p.tat - k.now)) * 1000)::float8 AS end_ms, k.idle_ms`,
    [channelId, n, horizonMs],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    granted: r.granted,
    firstInMs: Math.max(0, r.first_ms),
    intervalMs: r.interval_ms,
    retryInMs: Math.max(1, Math.ceil(r.end_ms - horizonMs / 2)),
    idleMs: r.idle_ms,
  };
}

/** A granted bulk slot a send of this process is waiting for (see `BulkPacer.hold` and `yieldTo`). */
interface HeldSlot {
  /** When it starts, local epoch ms. */
  at: number;
  timer: NodeJS.Timeout | undefined;
  release: () => void;
}

interface BulkDemand {
  remaining: number;
  deadline: number;
  grant: (offsetsMs: number[]) => void;
  done: (notGranted: number) => void;
  fail: (err: unknown) => void;
}

/**
 * The last step before a provider call, per channel and in this process, on the times calls are actually made.
 * Slots are decided on the channel's row (ADR 0003), but a process running late (a busy event loop, timers firing
 * together) would otherwise make the calls of several slots at once and exceed the channel's rate. Two rules:
 * - spacing (`delay`): calls at least one interval of the channel's top rate (`1000 / messagesPerSecond` ms) apart;
 * - the window (`admit`): never more than `messagesPerSecond` calls in any `windowMs` (a little over a second),
 *   counted on the clock when each call is made. Spacing alone is decided on when calls are due, not when they happen: sends woken late at the start
 *   of a second and on time at its end still crowded more than the rate into it (1,156 provider calls in one second
 *   of the 50,000-recipient bench at load 7).
 * So lateness turns into lost channel time, never into a burst above the rate.
 */
/** How many intervals ahead of its spacing a call may go (`SendSpacer.admit`): bursts of at most this many plus one. */
export const SPACING_TOLERANCE_INTERVALS = 8;

/**
 * The share of `messagesPerSecond` a process sends at most, on its own clock. The provider counts on its clock, after
 * the network's and its own scheduling: requests that waited together arrive together. In the 50,000-recipient bench
 * on this 2-core VM that moved 20 to 100 calls of a neighbouring second into the densest one (1,029 to 1,098 seen at
 * the provider with a full 1,000 here, 1,003 with 970); 4% of room absorbs it (ADR 0003).
 */
export const WINDOW_SHARE = 0.96;

/**
 * The window `admit` lets a channel's `messagesPerSecond` calls into: 1,000 ms / WINDOW_SHARE (about 1,042 ms). The
 * room is time, not calls: any second at the provider then holds at most `messagesPerSecond` calls as long as no call
 * is more than about 42 ms later there than a call sent before it, at every rate. (A share of the calls, 96 % of
 * them floored, left a channel of 2/s one call a second, and every channel under 25/s a whole call short.)
 */
export const WINDOW_MS = 1_000 / WINDOW_SHARE;

/**
 * The window of a channel of `messagesPerSecond`: `WINDOW_MS`, or a quarter of an interval over a second on the
 * slowest channels (1,250 ms at 1/s, 1,125 ms at 2/s, 1,050 ms at 5/s; `WINDOW_MS` from 6/s up). A call there waits a
 * whole interval for its turn, so a little of it buys room for a busy host's delays (a call 75 ms later than the one
 * before it put 3 calls of a 2/s channel into one second at the provider, at load 15) for a small share of the rate.
 */
export const windowMs = (messagesPerSecond: number) => Math.max(WINDOW_MS, 1_000 + 250 / messagesPerSecond);

/** Calls a process lets into any `WINDOW_MS` on a channel of `messagesPerSecond`: all of them. */
export const windowLimit = (messagesPerSecond: number) => Math.max(1, Math.floor(messagesPerSecond));

/** The times of a channel's last `limit` calls: a ring whose `head` is the oldest. */
interface Ring {
  limit: number;
  /** The window's length (ms): `windowMs` of the channel's rate. */
  span: number;
  calls: number[];
  head: number;
}

export class SendSpacer {
  private readonly next = new Map<string, number>();
  /** Per channel, the times of its last `limit` admissions (`admit`): a ring whose `head` is the oldest. */
  private readonly windows = new Map<string, Ring>();
  /** Per channel, the times of its last `limit` calls as made (`gate`), the same way. */
  private readonly made = new Map<string, Ring>();
  /** Per channel, the theoretical time of its next call on the clock of the calls (GCRA). */
  private readonly actualTat = new Map<string, number>();
  /** Single sends waiting for room in the channel's window: template sends wait behind them. */
  private readonly firstWaiting = new Map<string, number>();

  /** Reserves this process's next call on `channelId` and answers how long to wait for it (ms, 0 = now). */
  delay(channelId: string, intervalMs: number, now = performance.now()): number {
    const at = Math.max(now, this.next.get(channelId) ?? 0);
    this.next.set(channelId, at + intervalMs);
    if (this.next.size > 10_000) for (const [id, t] of this.next) if (t < now) this.next.delete(id);
    return at - now;
  }

  /**
   * A call on `channelId` (top rate `messagesPerSecond`) is about to be made at `now`: records it and answers 0 if
   * it keeps its spacing and fewer than `windowLimit(messagesPerSecond)` calls were made in the last `windowMs`;
   * otherwise records nothing and answers how long to wait before asking again (ms).
   */
  admit(channelId: string, messagesPerSecond: number, now = performance.now(), first = false): number {
    // A single send waiting for room in the window gets the next one.
    if (!first && (this.firstWaiting.get(channelId) ?? 0) > 0) return 1;
    // Spacing on the clock of the calls (GCRA, a few intervals of tolerance): sends whose spaced wake-ups a stall made
    // fire together go out one interval apart from the moment they wake. (A single send is spaced, never held here.)
    const intervalMs = 1_000 / messagesPerSecond;
    const tat = this.actualTat.get(channelId) ?? now;
    if (!first && tat - now > SPACING_TOLERANCE_INTERVALS * intervalMs) return Math.max(1, Math.ceil(tat - now - SPACING_TOLERANCE_INTERVALS * intervalMs));
    const waitMs = this.window(this.windows, channelId, messagesPerSecond, now);
    if (waitMs === 0) this.actualTat.set(channelId, Math.max(tat, now) + intervalMs);
    return waitMs;
  }

  /**
   * The last step before a provider call, after `turn` and whatever came between (the opt-out recheck of a send that
   * waited: a round trip, coalesced with other sends', answers several sends together): records the call and answers
   * 0 when fewer than `windowLimit(messagesPerSecond)` calls were made in the last `windowMs`, else records nothing
   * and answers how long to wait. `admit` keeps the window on the times sends were let go; this keeps it on the times
   * calls are made: sends let go 12 ms apart whose rechecks were answered together went out together, and a second at
   * the provider held up to 83 calls of a channel of 80/s.
   */
  gate(channelId: string, messagesPerSecond: number, now = performance.now()): number {
    return this.window(this.made, channelId, messagesPerSecond, now);
  }

  private window(rings: Map<string, Ring>, channelId: string, messagesPerSecond: number, now: number): number {
    const limit = windowLimit(messagesPerSecond);
    let w = rings.get(channelId);
    if (!w || w.limit !== limit) {
      w = { limit, span: windowMs(messagesPerSecond), calls: [], head: 0 };
      rings.set(channelId, w);
      if (rings.size > 10_000) {
        for (const [id, x] of rings) {
          if (x.calls.length > 0 && now - x.calls[(x.head + x.calls.length - 1) % x.calls.length] > x.span) {
            rings.delete(id);
            if (rings === this.windows) this.actualTat.delete(id);
          }
        }
      }
    }
    if (w.calls.length < limit) {
      w.calls.push(now);
      return 0;
    }
    const oldest = w.calls[w.head];
    if (now - oldest < w.span) return Math.max(1, Math.ceil(oldest + w.span - now));
    w.calls[w.head] = now;
    w.head = (w.head + 1) % limit;
    return 0;
  }

  /**
   * Waits until a call on the channel may be made now (spacing, then the window) and records it. A single send
   * (`first`) does not queue behind the spacing of bulk sends woken before it (ADR 0003, "Sharing the rate"): it
   * only moves the spacing on by one interval, and is held by the window like every call, but takes the window's
   * next room before any template send.
   */
  /** Waits until `gate` lets a call on the channel be made now, and records it; answers how long it waited (ms). */
  async passGate(channelId: string, messagesPerSecond: number): Promise<number> {
    let waitedMs = 0;
    for (let w = this.gate(channelId, messagesPerSecond); w > 0; w = this.gate(channelId, messagesPerSecond)) {
      await sleep(w);
      waitedMs += w;
    }
    return waitedMs;
  }

  async turn(channelId: string, messagesPerSecond: number, first = false): Promise<void> {
    const intervalMs = 1_000 / messagesPerSecond;
    if (first) {
      const now = performance.now();
      this.next.set(channelId, Math.max(now, this.next.get(channelId) ?? 0) + intervalMs);
    } else {
      const spacedMs = this.delay(channelId, intervalMs);
      if (spacedMs > 0) await sleep(spacedMs);
    }
    for (let waitMs = this.admit(channelId, messagesPerSecond, performance.now(), first); waitMs > 0; ) {
      if (first) this.firstWaiting.set(channelId, (this.firstWaiting.get(channelId) ?? 0) + 1);
      try {
        await sleep(waitMs);
      } finally {
        if (first) {
          const n = (this.firstWaiting.get(channelId) ?? 1) - 1;
          if (n > 0) this.firstWaiting.set(channelId, n);
          else this.firstWaiting.delete(channelId);
        }
      }
      waitMs = this.admit(channelId, messagesPerSecond, performance.now(), first);
    }
  }
}

/**
 * Room added to a throttled job's interval on the clock of the calls: the provider sees each call after its own
 * transport and scheduling, which moved calls a few ms closer together (up to 9 ms seen under load). 2 % of the
 * interval, 5 to 50 ms: the job never goes faster than `throttlePerHour`, at most 2 % (5 ms at 36,000/h) slower.
 */
export const jobSpacingMargin = (intervalMs: number) => Math.min(50, Math.max(5, intervalMs * 0.02));

/**
 * A throttled template job's spacing (`throttlePerHour`) on the clock of the provider calls, in this process.
 * template-jobs spaces the job's slots on its timeline and hands each send over when its slot is due, but the send then
 * passes messaging's own steps (opt-out check, store, pacing) in a variable time: a late send followed by one on time
 * reached the provider less than an interval after it (889 ms apart at 3,600 an hour on a busy machine). `turn` holds
 * a send until the interval (and `jobSpacingMargin`) after the job's previous provider call here, and serializes the
 * job's sends until `called` (or `notCalled`) marks the call made or not: lateness stays lateness, never a shorter gap.
 * Sends of one job through several messaging replicas are spaced by template-jobs' timeline only.
 */
export class JobSpacer {
  private readonly jobs = new Map<string, { lastCall: number; intervalMs: number; turn: Promise<void>; holders: number }>();

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly wait: (ms: number) => Promise<void> = sleep,
  ) {}

  /** Waits for the job's turn; the answer marks the call made (`called`) or not made (`notCalled`): the next send's turn then starts. */
  async turn(jobId: string, intervalMs: number): Promise<{ waitedMs: number; called(): void; notCalled(): void }> {
    const from = this.now();
    let job = this.jobs.get(jobId);
    if (!job) {
      job = { lastCall: -Infinity, intervalMs, turn: Promise.resolve(), holders: 0 };
      this.jobs.set(jobId, job);
      this.prune(from);
    }
    job.intervalMs = intervalMs;
    job.holders++;
    const previous = job.turn;
    let done!: () => void;
    job.turn = new Promise<void>((resolve) => (done = resolve));
    await previous;
    const spacing = intervalMs + jobSpacingMargin(intervalMs);
    // Timers may fire a little early: wait until the clock says so.
    for (let left = job.lastCall + spacing - this.now(); left > 0; left = job.lastCall + spacing - this.now()) await this.wait(Math.ceil(left));
    const state = job;
    let ended = false;
    const end = (called: boolean) => {
      if (ended) return;
      ended = true;
      state.holders--;
      if (called) state.lastCall = this.now();
      done();
    };
    return { waitedMs: this.now() - from, called: () => end(true), notCalled: () => end(false) };
  }

  private prune(now: number): void {
    if (this.jobs.size <= 10_000) return;
    for (const [id, j] of this.jobs) if (j.holders === 0 && j.lastCall + j.intervalMs < now) this.jobs.delete(id);
  }
}

/**
 * Bulk reservations of one process, coalesced per channel: every template
 * batch in flight on a channel queues its demand, and ONE loop per channel
 * reserves for all of them (`reserveBulkPacingSlots` with the sum), hands the
 * slots out first come first served, sleeps until the horizon has room again
 * and repeats. Without it, each concurrent batch polled the row on its own:
 * several times the round trips, most of them granted nothing.
 */
export class BulkPacer {
  private readonly queues = new Map<string, BulkDemand[]>();
  /** Reservation statements run so far (for tests and metrics). */
  roundTrips = 0;
  /** Slots granted so far. */
  granted = 0;
  /**
   * Channel time lost while this process had bulk demand waiting: the loop
   * asked again only after the timeline had already run past its last slot
   * (a late timer, a slow round trip), ms summed over channels.
   */
  lateMs = 0;
  /** Channel time that had passed unused when a loop started (no bulk demand here before), ms summed over channels. */
  gapMs = 0;
  /** Single sends that took a held bulk slot (`yieldTo`). */
  swaps = 0;
  /** Granted bulk slots not yet started, per channel, earliest first. */
  private readonly held = new Map<string, HeldSlot[]>();

  constructor(private readonly q: Queryable, private readonly horizonMs = BULK_HORIZON_MS) {}

  /**
   * Asks for `n` consecutive bulk slots on the channel; `grant` receives each
   * share as it comes (offsets from now, in ms, to wait in full). Resolves
   * with how many were not granted before `deadline` (epoch ms).
   */
  take(channelId: string, n: number, deadline: number, grant: (offsetsMs: number[]) => void): Promise<number> {
    if (n <= 0) return Promise.resolve(0);
    return new Promise<number>((done, fail) => {
      const queue = this.queues.get(channelId);
      const demand = { remaining: n, deadline, grant, done, fail };
      if (queue) {
        queue.push(demand);
        return;
      }
      this.queues.set(channelId, [demand]);
      this.run(channelId).catch((err: unknown) => {
        for (const d of this.queues.get(channelId) ?? []) d.fail(err);
        this.queues.delete(channelId);
      });
    });
  }

  /**
   * Waits for a granted bulk slot `offsetMs` from now. Until it starts, a
   * single send of this process may take it and leave its own, later slot in
   * exchange (`yieldTo`): the bulk send then waits for that one.
   */
  hold(channelId: string, offsetMs: number): Promise<void> {
    if (offsetMs <= 0) return Promise.resolve();
    return new Promise<void>((release) => {
      const slot: HeldSlot = { at: Date.now() + offsetMs, timer: undefined, release };
      this.arm(channelId, slot);
    });
  }

  /**
   * Single sends go first (ADR 0003, "Sharing the rate"): a single send whose
   * slot is `waitMs` from now takes the earliest bulk slot of this process on
   * the channel that starts before it, and that bulk send gets the single
   * send's slot. Both slots were reserved on the channel's row, so the
   * channel's timeline, and its rate, are unchanged; only who sends in which
   * slot changes. Answers how long the single send waits now.
   */
  yieldTo(channelId: string, waitMs: number): number {
    const slots = this.held.get(channelId);
    const now = Date.now();
    const mine = now + waitMs;
    if (!slots || slots.length === 0 || slots[0].at >= mine - 0.5) return waitMs;
    const earliest = slots.shift()!;
    clearTimeout(earliest.timer);
    const taken = earliest.at;
    earliest.at = mine;
    this.arm(channelId, earliest);
    this.swaps++;
    return Math.max(0, taken - now);
  }

  /** Puts a held slot in its channel's list (by start) and sets its timer. */
  private arm(channelId: string, slot: HeldSlot): void {
    let slots = this.held.get(channelId);
    if (!slots) this.held.set(channelId, (slots = []));
    let i = slots.length;
    while (i > 0 && slots[i - 1].at > slot.at) i--;
    slots.splice(i, 0, slot);
    slot.timer = setTimeout(() => {
      const list = this.held.get(channelId);
      const k = list ? list.indexOf(slot) : -1;
      if (k >= 0) list!.splice(k, 1);
      if (list && list.length === 0) this.held.delete(channelId);
      slot.release();
    }, Math.max(0, slot.at - Date.now()));
  }

  private async run(channelId: string): Promise<void> {
    const queue = this.queues.get(channelId)!;
    for (let first = true; queue.length > 0; first = false) {
      const total = queue.reduce((sum, d) => sum + d.remaining, 0);
      this.roundTrips++;
      const r = await reserveBulkPacingSlots(this.q, channelId, total, this.horizonMs);
      if (r) {
        this.granted += r.granted;
        if (first) this.gapMs += Math.min(r.idleMs, 60_000);
        else this.lateMs += r.idleMs;
      }
      if (!r) {
        // No pacing row (the channel is gone): nothing to wait for.
        for (const d of queue.splice(0)) {
          d.grant(Array.from({ length: d.remaining }, () => 0));
          d.done(0);
        }
        break;
      }
      let next = 0;
      while (next < r.granted && queue.length > 0) {
        const d = queue[0];
        const k = Math.min(d.remaining, r.granted - next);
        d.grant(Array.from({ length: k }, (_, i) => r.firstInMs + (next + i) * r.intervalMs));
        next += k;
        d.remaining -= k;
        if (d.remaining === 0) {
          queue.shift();
          d.done(0);
        }
      }
      const retryAt = Date.now() + r.retryInMs;
      for (let i = queue.length - 1; i >= 0; i--) {
        if (queue[i].deadline >= retryAt) continue;
        const [late] = queue.splice(i, 1);
        late.done(late.remaining);
      }
      if (queue.length > 0) await sleep(r.retryInMs);
    }
    this.queues.delete(channelId);
  }
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

/**
 * The provider said "too fast" (130429): multiplicative decrease of the
 * channel's rate (halved, not below `floorShare` of messagesPerSecond) and a
 * short pause, at most once per `decreaseCooldownMs` (the sends already in
 * flight at the old rate answer 130429 too: one signal, one decrease). The
 * rate then climbs back additively (`increaseSharePerSecond` of
 * messagesPerSecond per second) while no 130429 comes, up to messagesPerSecond.
 * Answers whether this call decreased the rate, and the rate right after.
 */
export async function slowDownChannel(q: Queryable, channelId: string): Promise<{ decreased: boolean; rate: number } | undefined> {
  const a = ADAPTIVE_PACING;
  const cooling = `(p.decreased_at IS NOT NULL AND p.decreased_at > t.now - ${a.decreaseCooldownMs} * interval '1 millisecond')`;
  const lowered = `greatest(p.messages_per_second * ${a.floorShare}, ${currentRateSql("p", "t.now")} * ${a.decreaseFactor})`;
  const rows = await run<{ decreased: boolean; rate: number }>(
    q,
    `WITH t AS (SELECT clock_timestamp() AS now)
     UPDATE ${SCHEMA}.channel_pacing p SET
       rate = CASE WHEN ${cooling} THEN p.rate ELSE ${lowered} END,
       decreased_at = CASE WHEN ${cooling} THEN p.decreased_at ELSE t.now END,
       tat = CASE WHEN ${cooling} THEN p.tat
                  ELSE greatest(p.tat, t.now) + least(${a.pauseMs / 1000}, 10.0 / ${lowered}) * interval '1 second' END
     FROM t WHERE p.channel_id = $1
     RETURNING (p.decreased_at = t.now) AS decreased, p.rate::float8 AS rate`,
    [channelId],
  );
  return rows[0];
}

/**
 * The channel's pacing rate (messages per second) at `at` (default: now, by
 * the database's clock), with its configured maximum: what the next
 * reservation's interval is computed from.
 */
export async function channelPacingRate(
  q: Queryable,
  channelId: string,
  at?: Date,
): Promise<{ rate: number; messagesPerSecond: number; decreasedAt: Date | null } | undefined> {
  const rows = await run<{ rate: number; messages_per_second: number; decreased_at: Date | null }>(
    q,
    `SELECT ${currentRateSql("p", "coalesce($2::timestamptz, clock_timestamp())")}::float8 AS rate, p.messages_per_second, p.decreased_at
     FROM ${SCHEMA}.channel_pacing p WHERE p.channel_id = $1`,
    [channelId, at ?? null],
  );
  const r = rows[0];
  return r && { rate: r.rate, messagesPerSecond: r.messages_per_second, decreasedAt: r.decreased_at };
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
