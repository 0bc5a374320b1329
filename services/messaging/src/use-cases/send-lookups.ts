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
 */
export class SendLookups {
  private channels = new Map<string, { row: ChannelRow; expiresAt: number }>();
  private windows = new Map<string, number>();

  constructor(
    private readonly db: Queryable,
    private readonly channelTtlMs = 5_000,
    private readonly maxWindows = 100_000,
  ) {}

  async forSend(organizationId: string, channelId: string | undefined, phone: string): Promise<SendLookup | undefined> {
    const now = Date.now();
    const channelKey = `${organizationId}|${channelId ?? ""}`;
    const cached = this.channels.get(channelKey);
    if (cached && cached.expiresAt > now) {
      const lastInbound = this.windows.get(`${cached.row.id}|${phone}`);
      if (lastInbound !== undefined && now - lastInbound <= SERVICE_WINDOW_MS) return { channel: cached.row, windowOpen: true };
    }
    const row = await channelsRepository.findForSend(this.db, organizationId, channelId, phone);
    if (!row) return undefined;
    const { last_inbound_at: lastInboundAt, ...channel } = row;
    this.channels.set(channelKey, { row: channel, expiresAt: now + this.channelTtlMs });
    const windowOpen = !!lastInboundAt && Date.now() - lastInboundAt.getTime() <= SERVICE_WINDOW_MS;
    if (windowOpen) this.rememberWindow(`${row.id}|${phone}`, lastInboundAt.getTime());
    return { channel, windowOpen };
  }

  /** A channel of the organization changed (here or on another replica). */
  forgetOrganization(organizationId: string): void {
    const prefix = `${organizationId}|`;
    for (const key of this.channels.keys()) if (key.startsWith(prefix)) this.channels.delete(key);
  }

  clear(): void {
    this.channels.clear();
  }

  private rememberWindow(key: string, lastInboundMs: number): void {
    this.windows.delete(key);
    this.windows.set(key, lastInboundMs);
    if (this.windows.size > this.maxWindows) this.windows.delete(this.windows.keys().next().value!);
  }
}
