import type { DataSource } from "typeorm";
import type { Logger } from "@platform/logging";
import type { Plan, RateLimit } from "@platform/contracts";
import { hashesEqual } from "./api-keys";

export interface Principal {
  keyId: string;
  organizationId: string;
}

export interface OrganizationPolicy {
  id: string;
  plan: Plan;
  rateLimit: RateLimit;
}

interface CacheEntry<T> {
  value: T;
  expiresAt: number;
}

/**
 * Verified keys and organization policies, cached in memory so the request
 * path does no database or bus round trip once a key is warm. Revocations
 * and organization changes are broadcast to every replica (and evicted here
 * at once); the TTL bounds staleness if a broadcast is missed, and the whole
 * cache is dropped when the NATS connection comes back after a gap.
 *
 * An eviction must also beat the loads already in flight: a query that read
 * the key's row just before the revocation committed would otherwise store
 * the still-valid row after the eviction, and the key would work for a whole
 * TTL. So every eviction bumps `generation` and forgets the pending loads; a
 * load that started under an older generation answers its own callers (they
 * were concurrent with the revocation) but is neither stored nor shared with
 * later callers. One counter for the whole cache rather than one per key:
 * the eviction names a key id while loads are keyed by hash, and evictions
 * are rare enough that dropping an unrelated load's result costs nothing.
 */
export class AuthCache {
  private keys = new Map<string, CacheEntry<Principal | null>>();
  private orgs = new Map<string, CacheEntry<OrganizationPolicy | null>>();
  private pendingKey = new Map<string, Promise<Principal | null>>();
  /** Keys used since the last flush, with the time of their last use (written as `last_used_at`). */
  private usedKeys = new Map<string, number>();
  /** Bumped by every eviction; a load from an older generation is not cached. */
  private generation = 0;
  private flushTimer?: NodeJS.Timeout;

  constructor(
    private readonly db: DataSource,
    private readonly defaults: RateLimit,
    private readonly log: Logger,
    private readonly ttlMs = 30_000,
    private readonly negativeTtlMs = 2_000,
  ) {}

  /** The principal of a key hash, or null when the key is unknown or revoked. */
  async principal(hash: string): Promise<Principal | null> {
    const now = Date.now();
    const hit = this.keys.get(hash);
    if (hit && hit.expiresAt > now) {
      if (hit.value) this.usedKeys.set(hit.value.keyId, now);
      return hit.value;
    }
    // Collapse concurrent misses for one key into one query.
    let pending = this.pendingKey.get(hash);
    if (!pending) {
      const load: Promise<Principal | null> = this.loadKey(hash).finally(() => {
        // An eviction may have replaced this load with a newer one meanwhile.
        if (this.pendingKey.get(hash) === load) this.pendingKey.delete(hash);
      });
      pending = load;
      this.pendingKey.set(hash, pending);
    }
    const value = await pending;
    if (value) this.usedKeys.set(value.keyId, Date.now());
    return value;
  }

  private async loadKey(hash: string): Promise<Principal | null> {
    const generation = this.generation;
    const rows: Array<{ id: string; organization_id: string; key_hash: string }> = await this.db.query(
      `SELECT id, organization_id, key_hash FROM gateway.api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
    const value = row && hashesEqual(row.key_hash, hash) ? { keyId: row.id, organizationId: row.organization_id } : null;
    if (generation === this.generation) this.keys.set(hash, { value, expiresAt: Date.now() + (value ? this.ttlMs : this.negativeTtlMs) });
    return value;
  }

  async organization(id: string): Promise<OrganizationPolicy | null> {
    const hit = this.orgs.get(id);
    if (hit && hit.expiresAt > Date.now()) return hit.value;
    const generation = this.generation;
    const rows: Array<{ id: string; plan: Plan; rate_limit_per_second: number | null; rate_limit_burst: number | null }> =
      await this.db.query(`SELECT id, plan, rate_limit_per_second, rate_limit_burst FROM gateway.organizations WHERE id = $1`, [id]);
    const row = rows[0];
    const value = row
      ? {
          id: row.id,
          plan: row.plan,
          rateLimit: {
            perSecond: row.rate_limit_per_second ?? this.defaults.perSecond,
            burst: row.rate_limit_burst ?? this.defaults.burst,
          },
        }
      : null;
    if (generation === this.generation) this.orgs.set(id, { value, expiresAt: Date.now() + (value ? this.ttlMs : this.negativeTtlMs) });
    return value;
  }

  evictKey(keyId: string): void {
    this.invalidateInFlight();
    for (const [hash, entry] of this.keys) if (entry.value?.keyId === keyId) this.keys.delete(hash);
  }

  evictOrganization(id: string): void {
    this.invalidateInFlight();
    this.orgs.delete(id);
    for (const [hash, entry] of this.keys) if (entry.value?.organizationId === id) this.keys.delete(hash);
  }

  clear(): void {
    this.invalidateInFlight();
    this.keys.clear();
    this.orgs.clear();
  }

  /** Loads already running may have read rows older than the eviction: none of them is stored or joined from now on. */
  private invalidateInFlight(): void {
    this.generation++;
    this.pendingKey.clear();
  }

  /**
   * `lastUsedAt` is written in batches every few seconds, not per request, with the time each key was last used (not
   * the time of the write: a key used, then revoked before the flush, has its use before its revocation).
   */
  startUsageFlush(everyMs = 5_000): void {
    this.flushTimer = setInterval(() => void this.flushUsage(), everyMs);
    this.flushTimer.unref();
  }

  async flushUsage(): Promise<void> {
    if (this.usedKeys.size === 0) return;
    const ids = [...this.usedKeys.keys()];
    const at = [...this.usedKeys.values()].map((ms) => new Date(ms).toISOString());
    this.usedKeys.clear();
    try {
      await this.db.query(
        `UPDATE gateway.api_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
           FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at) WHERE k.id = u.id`,
        [ids, at],
      );
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "could not record key usage");
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.flushTimer);
    await this.flushUsage();
  }
}
