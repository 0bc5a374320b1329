import type { DataSource } from "typeorm";
import type { Bus } from "@platform/bus";
import type { Logger } from "@platform/logging";
import type { ProviderClient } from "@platform/provider-client";
import type { ServiceDeps, ServiceEnv } from "@platform/service";
import type { envShape } from "./env";
import type { OptOutChecker } from "./use-cases/contacts";
import type { SendWrites } from "./use-cases/send-writes";
import type { ChannelPacer } from "./use-cases/pacing";
import type { SendLookups } from "./use-cases/send-lookups";

export type MessagingEnv = ServiceEnv<typeof envShape>;
export type MessagingDeps = ServiceDeps<MessagingEnv>;

/** What the use cases need: connections, config and the provider adapter (one per process). */
export interface MessagingContext {
  db: DataSource;
  bus: Bus;
  log: Logger;
  env: MessagingEnv;
  provider: ProviderClient;
  contactIds: ContactIdCache;
  /** Channels and open service windows of the send path, cached (see SendLookups for why that is safe). */
  lookups: SendLookups;
  pacer: ChannelPacer;
  optOuts: OptOutChecker;
  /** Concurrent sends' stores (with pacing slots) and sent marks: one statement and one commit per batch. */
  writes: SendWrites;
}

/**
 * Contact ids of recently messaged numbers. A contact's id never changes for
 * its (organization, phone) and contacts are never deleted, so a hit saves
 * the send path one bus round trip. Opt-outs are NOT cached: they must be
 * read-your-writes. Bounded; the oldest entries go first.
 */
export class ContactIdCache {
  private readonly map = new Map<string, string>();
  constructor(private readonly max = 50_000) {}

  get(organizationId: string, phone: string): string | undefined {
    return this.map.get(`${organizationId}|${phone}`);
  }

  set(organizationId: string, phone: string, contactId: string): void {
    const key = `${organizationId}|${phone}`;
    this.map.delete(key);
    this.map.set(key, contactId);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
}
