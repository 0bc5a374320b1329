import type { DataSource, EntityManager } from "typeorm";
import { queryBulk } from "@platform/db";
import { newId } from "@platform/id";

export interface ContactRow {
  id: string;
  phone: string;
  waId: string | null;
  name: string | null;
  email: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** Channels of the organization with an active opt-out for this phone. */
  optedOutChannelIds: string[];
}

/** Keyset position of the contacts list: (createdAt, id), strictly after. */
export interface ContactPosition {
  createdAt: string;
  id: string;
}

interface RawContact {
  id: string;
  phone: string;
  wa_id: string | null;
  name: string | null;
  email: string | null;
  created_at: Date;
  updated_at: Date;
  opted_out_channel_ids: string[];
}

/**
 * The id of input row `i`'s contact when the batch's insert did not return it (it existed already): one probe of the
 * unique (organization_id, phone) index per such row, evaluated only for them. (Joined instead, the planner, whose
 * statistics lag a fast-growing table, read every contact of the organization: 10 ms per template batch at 50,000.)
 */
const EXISTING_ID = `SELECT c.id FROM contacts.contacts c WHERE c.organization_id = $1 AND c.phone = i.phone`;

const toRow = (r: RawContact): ContactRow => ({
  id: r.id,
  phone: r.phone,
  waId: r.wa_id,
  name: r.name,
  email: r.email,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  optedOutChannelIds: r.opted_out_channel_ids ?? [],
});

/** Tenant-scoped access to contacts; every method takes the organization. */
export class ContactsRepository {
  constructor(private readonly db: DataSource) {}

  async findIdByPhone(manager: EntityManager, organizationId: string, phone: string): Promise<string | null> {
    const rows: Array<{ id: string }> = await manager.query(
      `SELECT id FROM contacts.contacts WHERE organization_id = $1 AND phone = $2`,
      [organizationId, phone],
    );
    return rows[0]?.id ?? null;
  }

  /**
   * The contact of (organization, phone), created when new; `name` and `waId`
   * are kept when given. The common case (known contact, nothing new) is one
   * read and no write.
   */
  async resolve(
    organizationId: string,
    phone: string,
    known: { name?: string; waId?: string },
  ): Promise<{ contactId: string; phone: string; created: boolean }> {
    const name = known.name?.trim() ? known.name : null;
    const waId = known.waId?.trim() ? known.waId : null;
    const existing: Array<{ id: string; name: string | null; wa_id: string | null }> = await this.db.query(
      `SELECT id, name, wa_id FROM contacts.contacts WHERE organization_id = $1 AND phone = $2`,
      [organizationId, phone],
    );
    const found = existing[0];
    if (found && (name === null || name === found.name) && (waId === null || waId === found.wa_id)) {
      return { contactId: found.id, phone, created: false };
    }
    // One statement for create-or-update: two resolvers racing on a new number get one row.
    const rows: Array<{ id: string; created: boolean }> = await this.db.query(
      `INSERT INTO contacts.contacts AS c (id, organization_id, phone, name, wa_id)
       VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (organization_id, phone) DO UPDATE
         SET name = COALESCE(EXCLUDED.name, c.name),
             wa_id = COALESCE(EXCLUDED.wa_id, c.wa_id),
             updated_at = date_trunc('milliseconds', now())
       RETURNING id, (xmax = 0) AS created`,
      [newId("contact"), organizationId, phone, name, waId],
    );
    return { contactId: rows[0].id, phone, created: rows[0].created };
  }

  /**
   * Contacts of many numbers at once (template jobs): one multi-row insert of
   * the new ones, then one read of the ones a concurrent writer created after
   * this statement's snapshot. Answers ids in the order of `phones`.
   */
  async resolveMany(
    organizationId: string,
    phones: string[],
    known: { names?: Array<string | null>; waIds?: Array<string | null> } = {},
  ): Promise<{ contactIds: string[]; created: number }> {
    // Sorted: concurrent bulk inserts take the unique-index locks in one order, so they never deadlock.
    const unique = [...new Set(phones)].sort();
    const ids = unique.map(() => newId("contact"));
    let rows: Array<{ phone: string; id: string | null; created: boolean }>;
    if (known.names || known.waIds) {
      // Inbound batches: name and waId kept as `resolve` keeps them (the last non-blank one given per number).
      const nameOf = new Map<string, string>();
      const waIdOf = new Map<string, string>();
      phones.forEach((p, k) => {
        const name = known.names?.[k];
        const waId = known.waIds?.[k];
        if (name?.trim()) nameOf.set(p, name);
        if (waId?.trim()) waIdOf.set(p, waId);
      });
      // Known numbers with nothing new are neither written nor locked: one read answers them (the common case).
      // Each number's row is read through the (organization, phone) key, one probe per number (a subquery per input
      // row, which the planner cannot turn into a join over the organization's contacts): so the plan, made once on
      // the bulk pool (ADR 0013), is the same whatever the statistics said then. Not on the hot pool
      // (`queryPrepared`): its few connections are the send path's opt-out checks', and an inbound flood there made
      // them wait into 503s.
      rows = await queryBulk(
        this.db,
        "contacts.resolve-many.profiles",
        `WITH input AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS t(phone, id, name, wa_id)),
         upserted AS (
           INSERT INTO contacts.contacts AS c (id, organization_id, phone, name, wa_id)
           SELECT i.id, $1, i.phone, i.name, i.wa_id FROM input i
           -- Written unless a row with this number has this name and waId already (or none given); NULL: no row.
           WHERE (SELECT (i.name IS NULL OR i.name = e.name) AND (i.wa_id IS NULL OR i.wa_id = e.wa_id)
                    FROM contacts.contacts e WHERE e.organization_id = $1 AND e.phone = i.phone) IS NOT TRUE
           ORDER BY i.phone
           ON CONFLICT (organization_id, phone) DO UPDATE
             SET name = COALESCE(EXCLUDED.name, c.name),
                 wa_id = COALESCE(EXCLUDED.wa_id, c.wa_id),
                 updated_at = date_trunc('milliseconds', now())
           RETURNING id, phone, (xmax = 0) AS created)
         SELECT i.phone, COALESCE(n.id, (${EXISTING_ID})) AS id, coalesce(n.created, false) AS created
         FROM input i
         LEFT JOIN upserted n ON n.phone = i.phone`,
        [organizationId, unique, ids, unique.map((p) => nameOf.get(p) ?? null), unique.map((p) => waIdOf.get(p) ?? null)],
      );
    } else {
      rows = await queryBulk(
        this.db,
        "contacts.resolve-many",
        `WITH input AS (SELECT * FROM unnest($2::text[], $3::text[]) AS t(phone, id)),
         inserted AS (
           INSERT INTO contacts.contacts (id, organization_id, phone)
           SELECT id, $1, phone FROM input ORDER BY phone
           ON CONFLICT (organization_id, phone) DO NOTHING
           RETURNING id, phone)
         SELECT i.phone, COALESCE(n.id, (${EXISTING_ID})) AS id, (n.id IS NOT NULL) AS created
         FROM input i
         LEFT JOIN inserted n ON n.phone = i.phone`,
        [organizationId, unique, ids],
      );
    }
    const byPhone = new Map<string, string>();
    let created = 0;
    const late: string[] = [];
    for (const r of rows) {
      if (r.id) byPhone.set(r.phone, r.id);
      else late.push(r.phone);
      if (r.created) created++;
    }
    if (late.length) {
      // Inserted by a concurrent transaction that committed after our snapshot: a new statement sees them.
      const found: Array<{ phone: string; id: string }> = await this.db.query(
        `SELECT phone, id FROM contacts.contacts WHERE organization_id = $1 AND phone = ANY($2::text[])`,
        [organizationId, late],
      );
      for (const r of found) byPhone.set(r.phone, r.id);
    }
    return {
      contactIds: phones.map((p) => {
        const id = byPhone.get(p);
        if (!id) throw new Error(`contact of ${p} not resolved`);
        return id;
      }),
      created,
    };
  }

  /**
   * One page of the organization's contacts after `after`, in (createdAt, id)
   * order. The row comparison walks the (organization_id, created_at, id)
   * index, so a page costs the same at any depth.
   */
  async page(organizationId: string, after: ContactPosition | null, limit: number): Promise<ContactRow[]> {
    const params: unknown[] = [organizationId, limit];
    let where = "";
    if (after) {
      params.push(after.createdAt, after.id);
      where = "AND (c.created_at, c.id) > ($3::timestamptz, $4::text)";
    }
    const rows: RawContact[] = await this.db.query(
      // updatedAt: the contact's own changes or its opt-outs' (set, cleared, set again), whichever is later, since
      // isOptedOut and optedOutChannelIds are part of the contact.
      `SELECT c.id, c.phone, c.wa_id, c.name, c.email, c.created_at,
              greatest(c.updated_at, (SELECT date_trunc('milliseconds', max(o.updated_at)) FROM contacts.opt_outs o
                                      WHERE o.organization_id = c.organization_id AND o.phone = c.phone)) AS updated_at,
              ARRAY(SELECT o.messaging_channel_id FROM contacts.opt_outs o
                    WHERE o.organization_id = c.organization_id AND o.phone = c.phone AND o.active
                    ORDER BY o.messaging_channel_id) AS opted_out_channel_ids
       FROM contacts.contacts c
       WHERE c.organization_id = $1 ${where}
       ORDER BY c.created_at, c.id
       LIMIT $2`,
      params,
    );
    return rows.map(toRow);
  }
}
