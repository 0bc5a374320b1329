import type { Bus } from "@platform/bus";
import { SUBJECTS } from "@platform/contracts";
import type { AuthCache } from "../auth/key-cache";

/**
 * The broadcasts this gateway replica listens to: a revoked key or a changed organization (plan, rate limit,
 * deletion) is evicted from its cache at once. A broadcast may have been missed while disconnected, so a reconnect
 * empties the cache. The rate limiters' usage gossip (`bcast.ratelimit.usage.v1`) is the limiter's own.
 */
export function listenToBroadcasts(bus: Bus, cache: AuthCache): void {
  bus.onBroadcast(SUBJECTS.apiKeyRevoked, ({ keyId }) => cache.evictKey(keyId));
  bus.onBroadcast(SUBJECTS.organizationChanged, ({ organizationId }) => cache.evictOrganization(organizationId));
  bus.onReconnect(() => cache.clear());
}
