import type { RateLimit } from "@platform/contracts";

export interface Decision {
  allowed: boolean;
  /** Whole tokens left after this request. */
  remaining: number;
  /** Seconds until a token is available again (for Retry-After), at least 1 when refused. */
  retryAfterSeconds: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
  limit: RateLimit;
}

/**
 * One token bucket per organization: `burst` capacity, refilled at
 * `perSecond`. Pure arithmetic on a Map; the clock is injected for tests.
 * `debit` takes tokens that other replicas spent (see ADR 0002), which may
 * push a bucket below zero: the debt is repaid by refill before anyone here
 * is served again.
 */
export class TokenBuckets {
  private buckets = new Map<string, Bucket>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  private refill(key: string, limit: RateLimit): Bucket {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) {
      bucket = { tokens: limit.burst, updatedAt: now, limit };
      this.buckets.set(key, bucket);
      return bucket;
    }
    if (bucket.limit.burst !== limit.burst || bucket.limit.perSecond !== limit.perSecond) {
      bucket.tokens = Math.min(bucket.tokens, limit.burst);
      bucket.limit = limit;
    }
    const elapsed = (now - bucket.updatedAt) / 1000;
    bucket.tokens = Math.min(limit.burst, bucket.tokens + elapsed * limit.perSecond);
    bucket.updatedAt = now;
    return bucket;
  }

  take(key: string, limit: RateLimit): Decision {
    const bucket = this.refill(key, limit);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return {
        allowed: true,
        remaining: Math.floor(bucket.tokens),
        retryAfterSeconds: 0,
        resetSeconds: Math.ceil((limit.burst - bucket.tokens) / limit.perSecond),
      };
    }
    return {
      allowed: false,
      remaining: 0,
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond)),
      resetSeconds: Math.ceil((limit.burst - bucket.tokens) / limit.perSecond),
    };
  }

  /**
   * Tokens spent on another replica. Without a bucket here, `limit` (the sender's) opens one, full before that usage:
   * a replica that has not served the organization yet must not start it on a fresh burst of its own.
   */
  debit(key: string, tokens: number, limit?: RateLimit): void {
    const known = this.buckets.get(key)?.limit ?? limit;
    if (!known) return;
    const bucket = this.refill(key, known);
    // Debt is capped at one burst so a burst of gossip never locks an org out for long.
    bucket.tokens = Math.max(-bucket.limit.burst, bucket.tokens - tokens);
  }

  /** Tokens an organization's bucket holds now (negative: debt), without refilling; undefined without a bucket. For tests and metrics. */
  tokens(key: string): number | undefined {
    return this.buckets.get(key)?.tokens;
  }

  /** The limit an organization's bucket was last used with; undefined without a bucket. */
  limit(key: string): RateLimit | undefined {
    return this.buckets.get(key)?.limit;
  }

  /** Forget idle buckets (full again) so memory follows active organizations. */
  sweep(): void {
    for (const [key, bucket] of this.buckets) {
      this.refill(key, bucket.limit);
      if (bucket.tokens >= bucket.limit.burst) this.buckets.delete(key);
    }
  }
}
