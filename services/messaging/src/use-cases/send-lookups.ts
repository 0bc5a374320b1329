import { Batcher, BoundedMap } from "@platform/runtime";
import type { ChannelRow } from "../db/repositories/channels.repository";
import { channelsRepository } from "../db/repositories/channels.repository";
import type { Queryable } from "../db/repositories/queryable";

/** The 24-hour customer service window. */
export const SERVICE_WINDOW_MS = 24 * 3_600_000;

export type SendLookup = { channel: ChannelRow; windowOpen: boolean };

/**
 * What a send needs to know before it stores anything: the channel (explicit,
 * or the organization's default) and whether the phone's service window on it
 * is open. Answered from memory when possible, so a steady stream of sends
 * costs no query here:
 * - channels are cached per organization for at most `channelTtlMs`, and
 *   dropped at once when this replica changes one, or when another replica
 *   says it did (`bcast.messaging.channels.changed.v1`), or after a NATS
 *   reconnect (a broadcast may have been missed);
 * - a window is cached only while open, with its last inbound time: an open
 *   window only ever moves forward (a newer inbound message), so the cached
 *   value can only close too early, never wrongly stay open, and a closed or
 *   unknown window is always read from the database.
 * What is not in memory is read for the concurrent sends of one
 * (organization, channel) together (`Batcher`, two in flight): ONE query for
 * the channel and the windows of all their phones. Before, each phone's first
 * send ran a query of its own, and a burst of sends to new numbers held the
 * hot statements' few connections. Each query starts after its callers
 * arrived, so it sees every window committed before they were received.
 */
export class SendLookups {
  private channels = new Map<string, { row: ChannelRow; expiresAt: number }>();
  /** Channels by the provider's phone number id (provider batches), kept and dropped like `channels`. */
  private byProviderNumber = new BoundedMap<string, { row: ChannelRow; expiresAt: number }>(10_000);
  /** Bumped by every eviction: a read that started before one is not kept (it may predate the change). */
  private generation = 0;
  private windows: BoundedMap<string, number>;
  private readonly reads: Batcher<string, (ChannelRow & { last_inbound_at: Date | null }) | undefined>;

  constructor(
    private readonly db: Queryable,
    private readonly channelTtlMs = 5_000,
    maxWindows = 100_000,
  ) {
    this.windows = new BoundedMap(maxWindows);
    this.reads = new Batcher(
      async (key, phones) => {
        const sep = key.indexOf("|");
        const organizationId = key.slice(0, sep);
        const channelId = key.slice(sep + 1) || undefined;
        const rows = await channelsRepository.findForSendMany(this.db, organizationId, channelId, [...new Set(phones)]);
        if (rows.length === 0) return phones.map(() => undefined);
        const { window_phone: _p, last_inbound_at: _l, ...channel } = rows[0];
        const windows = new Map(rows.filter((r) => r.window_phone !== null).map((r) => [r.window_phone!, r.last_inbound_at]));
        return phones.map((phone) => ({ ...(channel as ChannelRow), last_inbound_at: windows.get(phone) ?? null }));
      },
      500,
      2,
    );
  }

  /** Queries run for channels and windows not in memory (for tests and metrics). */
  get queries(): number {
    return this.reads.batches;
  }

  async forSend(organizationId: string, channelId: string | undefined, phone: string): Promise<SendLookup | undefined> {
    const now = Date.now();
    const channelKey = `${organizationId}|${channelId ?? ""}`;
    const cached = this.channels.get(channelKey);
    if (cached && cached.expiresAt > now) {
      const lastInbound = this.windows.get(`${cached.row.id}|${phone}`);
      if (lastInbound !== undefined && now - lastInbound <= SERVICE_WINDOW_MS) return { channel: cached.row, windowOpen: true };
    }
    const row = await this.reads.submit(channelKey, phone);
    if (!row) return undefined;
    const { last_inbound_at: lastInboundAt, ...channel } = row;
    this.channels.set(channelKey, { row: channel, expiresAt: now + this.channelTtlMs });
    const windowOpen = !!lastInboundAt && Date.now() - lastInboundAt.getTime() <= SERVICE_WINDOW_MS;
    if (windowOpen) this.rememberWindow(`${row.id}|${phone}`, lastInboundAt.getTime());
    return { channel, windowOpen };
  }

  /**
   * The channel a provider batch names by its phone number id, from memory for at most `channelTtlMs` (one
   * query per provider batch before). Unknown numbers are not kept: a channel created a moment ago is found.
   */
  async forProviderNumber(providerPhoneNumberId: string): Promise<ChannelRow | undefined> {
    const now = Date.now();
    const cached = this.byProviderNumber.get(providerPhoneNumberId);
    if (cached && cached.expiresAt > now) return cached.row;
    const generation = this.generation;
    const row = await channelsRepository.findByProviderPhoneNumberId(this.db, providerPhoneNumberId);
    if (row && generation === this.generation) {
      this.byProviderNumber.set(providerPhoneNumberId, { row, expiresAt: now + this.channelTtlMs });
    }
    return row;
  }

  /** A channel of the organization changed (here or on another replica). */
  forgetOrganization(organizationId: string): void {
    this.generation++;
    const prefix = `${organizationId}|`;
    for (const key of this.channels.keys()) if (key.startsWith(prefix)) this.channels.delete(key);
    for (const [key, { row }] of this.byProviderNumber) if (row.organization_id === organizationId) this.byProviderNumber.delete(key);
  }

  clear(): void {
    this.generation++;
    this.channels.clear();
    this.byProviderNumber.clear();
  }

  private rememberWindow(key: string, lastInboundMs: number): void {
    this.windows.set(key, lastInboundMs);
  }
}
