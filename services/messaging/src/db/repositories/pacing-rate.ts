/**
 * The adaptive rate of a channel's pacing row (docs/adr/0003-channel-pacing.md,
 * "Adaptive rate after 130429"): multiplicative decrease when the provider
 * says "too fast", additive increase back to `messages_per_second` while it
 * does not. Computed from the row at the statement's clock, so the increase
 * costs no write per send.
 */
export const ADAPTIVE_PACING = {
  /** A 130429 halves the rate at the moment it arrives... */
  decreaseFactor: 0.5,
  /** ...at most once per this long: the sends already in flight at the old rate answer 130429 too, and are one signal. */
  decreaseCooldownMs: 1_000,
  /** ...but never below this share of messagesPerSecond. */
  floorShare: 1 / 16,
  /** Then the rate climbs back by this share of messagesPerSecond per second without 130429 (half → full in 5 s). */
  increaseSharePerSecond: 0.1,
  /** A 130429 also pauses the channel this long (at most; ten intervals on a fast channel). */
  pauseMs: 250,
} as const;

/**
 * SQL of the channel's current rate (messages per second, float8) for pacing
 * row alias `p` at timestamp expression `now`: `messages_per_second` when never
 * decreased, else the rate right after the last decrease plus the additive
 * increase since, capped at `messages_per_second`.
 */
export const currentRateSql = (p: string, now: string) =>
  `(CASE WHEN ${p}.decreased_at IS NULL OR ${p}.rate IS NULL THEN ${p}.messages_per_second::float8
     ELSE least(${p}.messages_per_second::float8,
                ${p}.rate + ${p}.messages_per_second * ${ADAPTIVE_PACING.increaseSharePerSecond} * greatest(0, extract(epoch FROM (${now} - ${p}.decreased_at)))::float8)
   END)`;
