import { SUBJECTS, type RateLimit } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import { TokenBuckets, type Decision } from "./token-bucket";

/**
 * The per-organization limit across gateway replicas. Each replica decides
 * locally at once; every `intervalMs` it broadcasts how many requests it
 * admitted per organization, and the others debit their own buckets by that
 * much. N replicas together therefore converge on one budget, overshooting
 * by at most what they admit within one gossip interval. ADR 0002.
 */
export class RateLimiter {
  readonly buckets: TokenBuckets;
  private admitted = new Map<string, number>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly replica: string, private readonly bus?: Bus, private readonly intervalMs = 200, clock?: () => number) {
    this.buckets = new TokenBuckets(clock);
  }

  start(): void {
    this.bus?.onBroadcast(SUBJECTS.rateLimitUsage, (msg) => {
      if (msg.replica === this.replica) return;
      for (const [org, count] of Object.entries(msg.counts)) this.buckets.debit(org, count);
    });
    this.timer = setInterval(() => this.gossip(), this.intervalMs);
    this.timer.unref();
    const sweeper = setInterval(() => this.buckets.sweep(), 60_000);
    sweeper.unref();
  }

  take(organizationId: string, limit: RateLimit): Decision {
    const decision = this.buckets.take(organizationId, limit);
    if (decision.allowed) this.admitted.set(organizationId, (this.admitted.get(organizationId) ?? 0) + 1);
    return decision;
  }

  private gossip(): void {
    if (this.admitted.size === 0 || !this.bus) {
      this.admitted.clear();
      return;
    }
    const counts = Object.fromEntries(this.admitted);
    this.admitted.clear();
    try {
      this.bus.broadcast(SUBJECTS.rateLimitUsage, { replica: this.replica, counts });
    } catch {
      // Gossip is best effort: without it each replica still enforces its own bucket.
    }
  }

  stop(): void {
    clearInterval(this.timer);
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
