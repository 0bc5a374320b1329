import type { DataSource, EntityManager } from "typeorm";
import { queryPrepared } from "@platform/db";
import { newId } from "@platform/id";
import type { OptOutSource } from "../entities/opt-out.entity";

export interface OptOutRecord {
  id: string;
  active: boolean;
  revokedAt: Date | null;
  reason: string | null;
}

interface RawOptOut {
  id: string;
  active: boolean;
  revoked_at: Date | null;
  reason: string | null;
}
const toRecord = (r: RawOptOut): OptOutRecord => ({ id: r.id, active: r.active, revokedAt: r.revoked_at, reason: r.reason });

/** A whole opt-out row as the look-up reads it. */
export interface RawOptOutRow {
  id: string;
  messaging_channel_id: string;
  phone: string;
  active: boolean;
  source: OptOutSource;
  keyword: string | null;
  reason: string | null;
  created_at: Date;
  updated_at: Date;
  revoked_at: Date | null;
}

export interface OptOutKey {
  organizationId: string;
  messagingChannelId: string;
  phone: string;
}

/**
 * Opt-out records, one per (organization, channel, phone). Writes are single
 * statements that lock the row, so concurrent set/clear calls on one pair
 * serialize and each caller learns whether it caused the transition.
 */
export class OptOutsRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Makes the opt-out active. `activated` is true only for the call that moved
   * it from none/revoked into active (the one that must emit `optout.created`).
   * An already active record is left as it is.
   */
  async activate(
    manager: EntityManager,
    key: OptOutKey,
    how: { source: OptOutSource; keyword: string | null; reason: string | null },
  ): Promise<{ record: OptOutRecord; activated: boolean }> {
    const changed: RawOptOut[] = await manager.query(
      `INSERT INTO contacts.opt_outs AS o (id, organization_id, messaging_channel_id, phone, active, source, keyword, reason)
       VALUES ($1, $2, $3, $4, true, $5, $6, $7)
       ON CONFLICT (organization_id, messaging_channel_id, phone) DO UPDATE
         SET active = true, revoked_at = NULL, source = EXCLUDED.source, keyword = EXCLUDED.keyword,
             reason = EXCLUDED.reason, updated_at = now()
         WHERE NOT o.active
       RETURNING o.id, o.active, o.revoked_at, o.reason`,
      [newId("optOut"), key.organizationId, key.messagingChannelId, key.phone, how.source, how.keyword, how.reason],
    );
    if (changed[0]) return { record: toRecord(changed[0]), activated: true };
    // Already active: ON CONFLICT locked the row for this transaction even though it did not update it.
    const current = await this.find(manager, key);
    if (!current) throw new Error("opt-out vanished while locked");
    return { record: current, activated: false };
  }

  /** Revokes an active opt-out; answers the record as it now is (null when there never was one). */
  async revoke(manager: EntityManager, key: OptOutKey): Promise<OptOutRecord | null> {
    const changed: RawOptOut[] = await manager.query(
      // Wrapped in a CTE so the driver answers rows (a bare UPDATE answers [rows, count]).
      `WITH revoked AS (
         UPDATE contacts.opt_outs SET active = false, revoked_at = now(), updated_at = now()
         WHERE organization_id = $1 AND messaging_channel_id = $2 AND phone = $3 AND active
         RETURNING id, active, revoked_at, reason)
       SELECT * FROM revoked`,
      [key.organizationId, key.messagingChannelId, key.phone],
    );
    if (changed[0]) return toRecord(changed[0]);
    return this.find(manager, key);
  }

  async find(manager: EntityManager, key: OptOutKey): Promise<OptOutRecord | null> {
    const rows: RawOptOut[] = await manager.query(
      `SELECT id, active, revoked_at, reason FROM contacts.opt_outs
       WHERE organization_id = $1 AND messaging_channel_id = $2 AND phone = $3`,
      [key.organizationId, key.messagingChannelId, key.phone],
    );
    return rows[0] ? toRecord(rows[0]) : null;
  }

  /** Every channel's record for one phone of the organization (the console's look-up), active first. */
  async byPhone(organizationId: string, phone: string): Promise<RawOptOutRow[]> {
    return this.db.query(
      `SELECT id, messaging_channel_id, phone, active, source, keyword, reason, created_at, updated_at, revoked_at
       FROM contacts.opt_outs WHERE organization_id = $1 AND phone = $2
       ORDER BY active DESC, messaging_channel_id`,
      [organizationId, phone],
    );
  }

  /** Which of `phones` have an active opt-out on the channel: one query whatever the count. */
  async activeAmong(organizationId: string, messagingChannelId: string, phones: string[]): Promise<string[]> {
    // Every send asks this: prepared once per connection.
    const rows = await queryPrepared<{ phone: string }>(
      this.db,
      "contacts.activeOptOutsAmong",
      `SELECT phone FROM contacts.opt_outs
       WHERE organization_id = $1 AND messaging_channel_id = $2 AND active AND phone = ANY($3::text[])`,
      [organizationId, messagingChannelId, phones],
    );
    return rows.map((r) => r.phone);
  }
}
