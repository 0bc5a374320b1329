/** Weight of the newest gap in a key's average (about the last five arrivals count). */
const SMOOTHING = 0.2;
/**
 * A stream's wait, in average gaps: with arrivals at random (Poisson) a wait of one gap catches the next arrival 63 %
 * of the time, of two gaps 86 % (two on average). Measured: one gap cut the transactions but not the CPU at 500
 * inbound messages per second; two cut both (bench/RESULTS.md, 2026-11-27).
 */
const GAPS_WAITED = 2;
/** Calls this close to the previous arrival belong to it (a burst: the messages of one read from a socket). */
const BURST_MS = 1;
/** Keys kept before the quiet ones are forgotten. */
const MAX_KEYS = 10_000;

/**
 * How long a group write that would start on an idle key waits for more work, read from the gaps between the key's
 * recent arrivals (ADR 0016).
 *
 * - A stream (the key's calls arrive less than `maxMs` apart on average, the last one too): wait about two average
 *   gaps, at least `minMs`, at most `maxMs`. The next calls most likely come within it and share the write: its
 *   transaction and every statement after it down the pipeline.
 * - A trickle, or the first call after a pause: do not wait. Nobody would join the write, and each stage's wait
 *   would only add to the latency of a quiet integrator.
 *
 * A burst (calls less than a millisecond after the first of them) counts as one arrival: what a wait can gather is
 * the next burst. `arrived(key)` records a call; `delayMs(key)` says how long the write it would start should wait
 * now.
 */
export class ArrivalLinger {
  private readonly keys = new Map<string, { lastMs: number; lastGapMs?: number; averageGapMs?: number }>();

  /** The bounds default to those of the inbound path's group commits (ADR 0016): 5 ms, the old fixed wait, to 20 ms. */
  constructor(
    readonly minMs = 5,
    readonly maxMs = 20,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    if (!(minMs >= 0 && maxMs >= minMs)) throw new RangeError(`linger bounds ${minMs}–${maxMs} ms`);
  }

  arrived(key = ""): void {
    const now = this.nowMs();
    const state = this.keys.get(key);
    if (!state) {
      if (this.keys.size >= MAX_KEYS) this.forgetQuiet(now);
      this.keys.set(key, { lastMs: now });
      return;
    }
    if (now - state.lastMs < BURST_MS) return;
    // Any gap longer than a few lingers says the same (no stream): capped, so that one pause does not outweigh the
    // stream that follows it for long.
    const gap = Math.min(Math.max(0, now - state.lastMs), this.maxMs * 4);
    state.averageGapMs = state.averageGapMs === undefined ? gap : state.averageGapMs + (gap - state.averageGapMs) * SMOOTHING;
    state.lastGapMs = gap;
    state.lastMs = now;
  }

  delayMs(key = ""): number {
    const state = this.keys.get(key);
    if (state?.averageGapMs === undefined || state.lastGapMs === undefined) return 0;
    if (state.averageGapMs > this.maxMs || state.lastGapMs > this.maxMs) return 0;
    return Math.min(this.maxMs, Math.max(this.minMs, GAPS_WAITED * state.averageGapMs));
  }

  /** Keys remembered (for tests). */
  get size(): number {
    return this.keys.size;
  }

  private forgetQuiet(now: number): void {
    for (const [key, state] of this.keys) if (now - state.lastMs > this.maxMs * 4) this.keys.delete(key);
  }
}
