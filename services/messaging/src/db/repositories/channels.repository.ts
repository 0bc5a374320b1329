import type { Channel } from "@platform/contracts";
import { iso } from "@platform/db";
import { run, runPrepared, SCHEMA, type Queryable } from "./queryable";

export interface ChannelRow {
  id: string;
  organization_id: string;
  name: string;
  phone_number: string;
  provider_phone_number_id: string;
  connected: boolean;
  is_default: boolean;
  messages_per_second: number;
  created_at: Date;
  updated_at: Date;
}

export const toChannel = (r: ChannelRow): Channel => ({
  id: r.id,
  name: r.name,
  phoneNumber: r.phone_number,
  providerPhoneNumberId: r.provider_phone_number_id,
  connected: r.connected,
  isDefault: r.is_default,
  messagesPerSecond: r.messages_per_second,
  createdAt: iso(r.created_at)!,
  updatedAt: iso(r.updated_at)!,
});

/** Tenant-scoped channel queries; only `findByProviderPhoneNumberId` is global (the provider does not know tenants). */
export const channelsRepository = {
  /** Serializes channel writes of one organization (the default-channel rule). */
  async lockOrganization(q: Queryable, organizationId: string): Promise<void> {
    await run(q, `SELECT pg_advisory_xact_lock(hashtext('messaging.channels:' || $1))`, [organizationId]);
  },

  async countInOrganization(q: Queryable, organizationId: string): Promise<number> {
    const rows = await run(q, `SELECT count(*)::int AS n FROM ${SCHEMA}.channels WHERE organization_id = $1`, [organizationId]);
    return rows[0].n;
  },

  /** Clears the default flag of the organization's other channels; returns the channels it changed. */
  async clearDefault(q: Queryable, organizationId: string, exceptId: string | null): Promise<ChannelRow[]> {
    return run(q, 
      `UPDATE ${SCHEMA}.channels SET is_default = false, updated_at = clock_timestamp()
       WHERE organization_id = $1 AND is_default AND id IS DISTINCT FROM $2 RETURNING *`,
      [organizationId, exceptId],
    );
  },

  /** The organization's first channel created other than `exceptId`, if any. */
  async firstOtherId(q: Queryable, organizationId: string, exceptId: string): Promise<string | undefined> {
    const rows = await run(q, `SELECT id FROM ${SCHEMA}.channels WHERE organization_id = $1 AND id <> $2 ORDER BY created_at, id LIMIT 1`, [organizationId, exceptId]);
    return rows[0]?.id;
  },

  /** Marks a channel default (its organization's default, if any, must have lost the flag already). */
  async markDefault(q: Queryable, organizationId: string, id: string): Promise<ChannelRow> {
    const rows = await run(q, 
      `UPDATE ${SCHEMA}.channels SET is_default = true, updated_at = clock_timestamp() WHERE organization_id = $1 AND id = $2 RETURNING *`,
      [organizationId, id],
    );
    return rows[0];
  },

  async insert(q: Queryable, row: Omit<ChannelRow, "created_at" | "updated_at">): Promise<ChannelRow> {
    const rows = await run(q, 
      `INSERT INTO ${SCHEMA}.channels (id, organization_id, name, phone_number, provider_phone_number_id, connected, is_default, messages_per_second)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
      [row.id, row.organization_id, row.name, row.phone_number, row.provider_phone_number_id, row.connected, row.is_default, row.messages_per_second],
    );
    await run(q, `INSERT INTO ${SCHEMA}.channel_pacing (channel_id, messages_per_second) VALUES ($1, $2)`, [row.id, row.messages_per_second]);
    return rows[0];
  },

  async update(
    q: Queryable,
    organizationId: string,
    id: string,
    patch: { name?: string; connected?: boolean; isDefault?: boolean; messagesPerSecond?: number },
  ): Promise<ChannelRow | undefined> {
    const rows = await run(q, 
      `UPDATE ${SCHEMA}.channels SET
         name = coalesce($3, name),
         connected = coalesce($4, connected),
         is_default = coalesce($5, is_default),
         messages_per_second = coalesce($6, messages_per_second),
         updated_at = clock_timestamp()
       WHERE organization_id = $1 AND id = $2 RETURNING *`,
      [organizationId, id, patch.name ?? null, patch.connected ?? null, patch.isDefault ?? null, patch.messagesPerSecond ?? null],
    );
    if (rows[0] && patch.messagesPerSecond !== undefined) {
      await run(q, `UPDATE ${SCHEMA}.channel_pacing SET messages_per_second = $2 WHERE channel_id = $1`, [id, patch.messagesPerSecond]);
    }
    return rows[0];
  },

  async findById(q: Queryable, organizationId: string, id: string): Promise<ChannelRow | undefined> {
    const rows = await run(q, `SELECT * FROM ${SCHEMA}.channels WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0];
  },

  /** A page of the organization's channels in creation order, after the channel `afterId` (keyset on its exact position). */
  async page(q: Queryable, organizationId: string, limit: number, afterId?: string): Promise<ChannelRow[]> {
    if (afterId !== undefined) {
      return run(
        q,
        `SELECT c.* FROM ${SCHEMA}.channels c, ${SCHEMA}.channels a
         WHERE a.organization_id = $1 AND a.id = $2 AND c.organization_id = $1 AND (c.created_at, c.id) > (a.created_at, a.id)
         ORDER BY c.created_at, c.id LIMIT $3`,
        [organizationId, afterId, limit],
      );
    }
    return run(q, `SELECT * FROM ${SCHEMA}.channels WHERE organization_id = $1 ORDER BY created_at, id LIMIT $2`, [organizationId, limit]);
  },

  async findByProviderPhoneNumberId(q: Queryable, providerPhoneNumberId: string): Promise<ChannelRow | undefined> {
    const rows = await run(q, `SELECT * FROM ${SCHEMA}.channels WHERE provider_phone_number_id = $1`, [providerPhoneNumberId]);
    return rows[0];
  },

  /**
   * The sending channel and, in the same round trip, the provider timestamp of
   * the last inbound message of each of `phones` on it (the 24-hour window),
   * for the concurrent sends of one (organization, channel). Without an
   * explicit id: the organization's default channel, the one marked default
   * or, when none is, the first created (contract section 2). One row per phone with a window (the
   * channel repeated), one row with `window_phone` null when none has one; no
   * rows when there is no such channel.
   */
  async findForSendMany(
    q: Queryable,
    organizationId: string,
    channelId: string | undefined,
    phones: string[],
  ): Promise<Array<ChannelRow & { window_phone: string | null; last_inbound_at: Date | null }>> {
    return runPrepared(
      q,
      "findForSendMany",
      `SELECT c.*, w.phone AS window_phone, w.last_inbound_at
       FROM (SELECT * FROM ${SCHEMA}.channels c
             WHERE c.organization_id = $1 AND ($2::text IS NULL OR c.id = $2::text)
             ORDER BY c.is_default DESC, c.created_at, c.id
             LIMIT 1) c
       LEFT JOIN ${SCHEMA}.service_windows w ON w.channel_id = c.id AND w.phone = ANY($3::text[])`,
      [organizationId, channelId ?? null, phones],
    );
  },
};
