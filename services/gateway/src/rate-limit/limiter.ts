import { SUBJECTS, type RateLimit } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import { TokenBuckets, type Decision } from "./token-bucket";

/** What the limiter needs of the bus: the usage broadcast, both ways (a `Bus`; a pure unit test passes an in-memory one). */
export type UsageBus = Pick<Bus, "broadcast" | "onBroadcast">;

/** Share of its bucket a replica may admit before it tells the others at once rather than on the timer. ADR 0002. */
export const PROMPT_SHARE = 1 / 32;
/** An organization's refill over this long is never worth a message of its own (bounds publishes at the limit). */
export const PROMPT_FLOOR_SECONDS = 0.005;

/**
 * How many unpublished admissions of one organization make a replica publish them now (at the end of this event-loop
 * turn) instead of at the next tick of the timer: 1/32 of the tokens its bucket holds, so the closer the budget is to
 * empty the sooner the others hear of it; at least 5 ms of refill capped at 1/32 of the burst; at least 1.
 */
export function promptThreshold(tokens: number, limit: RateLimit): number {
  const floor = Math.min(Math.ceil(limit.perSecond * PROMPT_FLOOR_SECONDS), Math.floor(limit.burst * PROMPT_SHARE));
  return Math.max(1, Math.floor(Math.max(0, tokens) * PROMPT_SHARE), floor);
}

/**
 * The per-organization limit across gateway replicas. Each replica decides locally at once and tells the others what
 * it admitted (`bcast.ratelimit.usage.v1`); they debit their own buckets by that much, so N replicas share one budget.
 * An organization's count is published as soon as it reaches `promptThreshold` (coalesced: at most one message per
 * event-loop turn, from `setImmediate`), the rest every `intervalMs`. The overshoot is then what the other replicas
 * admitted and had not yet published: under 1/32 of the burst each, and about one bus hop's worth as the budget runs
 * out. ADR 0002.
 */
export class RateLimiter {
  readonly buckets: TokenBuckets;
  /** Admitted here and not yet published, per organization. */
  private pending = new Map<string, number>();
  /** Organizations whose count is published at the end of this turn. */
  private due = new Set<string>();
  private immediate?: NodeJS.Immediate;
  private timer?: NodeJS.Timeout;
  private sweeper?: NodeJS.Timeout;
  /** Usage messages sent and received, by cause (for tests, metrics and the bench). */
  readonly stats = { promptPublishes: 0, timerPublishes: 0, received: 0 };

  constructor(private readonly replica: string, private readonly bus?: UsageBus, private readonly intervalMs = 200, clock?: () => number) {
    this.buckets = new TokenBuckets(clock);
  }

  start(): void {
    this.bus?.onBroadcast(SUBJECTS.rateLimitUsage, (msg) => this.receive(msg));
    this.timer = setInterval(() => this.publish(this.pending.keys(), "timer"), this.intervalMs);
    this.timer.unref();
    this.sweeper = setInterval(() => this.buckets.sweep(), 60_000);
    this.sweeper.unref();
  }

  take(organizationId: string, limit: RateLimit): Decision {
    const decision = this.buckets.take(organizationId, limit);
    if (decision.allowed) {
      const count = (this.pending.get(organizationId) ?? 0) + 1;
      this.pending.set(organizationId, count);
      if (count >= promptThreshold(decision.remaining, limit)) this.markDue(organizationId);
    }
    return decision;
  }

  /** Another replica's usage: debit it here, and publish our own count of those organizations at once if the debit made it due. */
  private receive(msg: { replica: string; counts: Record<string, number>; limits?: Record<string, RateLimit> }): void {
    if (msg.replica === this.replica) return;
    this.stats.received++;
    for (const [org, count] of Object.entries(msg.counts)) {
      this.buckets.debit(org, count, msg.limits?.[org]);
      if (this.pending.has(org)) this.checkPrompt(org);
    }
  }

  private checkPrompt(org: string): void {
    const count = this.pending.get(org) ?? 0;
    const limit = this.buckets.limit(org);
    if (limit && count >= promptThreshold(this.buckets.tokens(org) ?? limit.burst, limit)) this.markDue(org);
  }

  private markDue(org: string): void {
    this.due.add(org);
    // One message per turn however many requests this turn admitted: a busy replica batches, an idle one is prompt.
    this.immediate ??= setImmediate(() => {
      this.immediate = undefined;
      const due = [...this.due];
      this.due.clear();
      this.publish(due, "prompt");
    });
  }

  private publish(orgs: Iterable<string>, cause: "prompt" | "timer"): void {
    const counts: Record<string, number> = {};
    const limits: Record<string, RateLimit> = {};
    let any = false;
    for (const org of orgs) {
      const count = this.pending.get(org);
      this.pending.delete(org);
      if (!count) continue;
      counts[org] = count;
      const limit = this.buckets.limit(org);
      if (limit) limits[org] = limit;
      any = true;
    }
    if (!any || !this.bus) return;
    if (cause === "prompt") this.stats.promptPublishes++;
    else this.stats.timerPublishes++;
    try {
      this.bus.broadcast(SUBJECTS.rateLimitUsage, { replica: this.replica, counts, limits });
    } catch {
      // Gossip is best effort: without it each replica still enforces its own bucket.
    }
  }

  stop(): void {
    clearInterval(this.timer);
    clearInterval(this.sweeper);
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
  }
}

/** IETF RateLimit headers (draft-ietf-httpapi-ratelimit-headers): the policy and the current state. */
export function rateLimitHeaders(limit: RateLimit, decision: Decision): Record<string, string> {
  const window = Math.max(1, Math.ceil(limit.burst / limit.perSecond));
  return {
    "RateLimit-Policy": `"org";q=${limit.burst};w=${window}`,
    RateLimit: `"org";r=${decision.remaining};t=${decision.allowed ? decision.resetSeconds : decision.retryAfterSeconds}`,
  };
}
