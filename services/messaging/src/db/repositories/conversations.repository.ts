import type { Conversation } from "@platform/contracts";
import { iso } from "@platform/db";
import { newId } from "@platform/id";
import { run, runPrepared, SCHEMA, type Queryable } from "./queryable";

export interface ConversationRow {
  id: string;
  organization_id: string;
  channel_id: string;
  contact_id: string;
  phone: string;
  status: "open" | "closed";
  opened_at: Date;
  closed_at: Date | null;
  last_message_at: Date;
  created_at: Date;
  updated_at: Date;
}

export const toConversation = (r: ConversationRow): Conversation => ({
  id: r.id,
  contactId: r.contact_id,
  messagingChannelId: r.channel_id,
  phone: r.phone,
  status: r.status,
  openedAt: iso(r.opened_at)!,
  closedAt: iso(r.closed_at),
  lastMessageAt: iso(r.last_message_at)!,
  createdAt: iso(r.created_at)!,
  updatedAt: iso(r.updated_at)!,
});

export const conversationsRepository = {
  /**
   * The open conversation of (channel, contact), touched by a new message, or
   * a new one when none is open. One statement: the partial unique index keeps
   * it at one open conversation even when two messages race.
   */
  async openOrTouch(
    q: Queryable,
    input: { organizationId: string; channelId: string; contactId: string; phone: string },
  ): Promise<{ conversation: ConversationRow; opened: boolean }> {
    const rows = await run(q, 
      `INSERT INTO ${SCHEMA}.conversations (id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, 'open', clock_timestamp(), clock_timestamp(), date_trunc('milliseconds', clock_timestamp()), clock_timestamp())
       ON CONFLICT (channel_id, contact_id) WHERE status = 'open'
       DO UPDATE SET last_message_at = greatest(conversations.last_message_at, EXCLUDED.last_message_at), updated_at = EXCLUDED.updated_at
       RETURNING *, (xmax = 0) AS opened`,
      [newId("conversation"), input.organizationId, input.channelId, input.contactId, input.phone],
    );
    const { opened, ...conversation } = rows[0];
    return { conversation: conversation as ConversationRow, opened: Boolean(opened) };
  },

  /**
   * `openOrTouch` for many contacts of one channel in one statement (each
   * contact once), in contact order so that concurrent batches lock the same
   * rows in the same order. Answers one row per contact.
   */
  async openOrTouchMany(
    q: Queryable,
    input: { organizationId: string; channelId: string; contacts: Array<{ contactId: string; phone: string }> },
  ): Promise<Map<string, { conversation: ConversationRow; opened: boolean }>> {
    const contacts = [...new Map(input.contacts.map((c) => [c.contactId, c])).values()].sort((a, b) => (a.contactId < b.contactId ? -1 : a.contactId > b.contactId ? 1 : 0));
    const out = new Map<string, { conversation: ConversationRow; opened: boolean }>();
    if (contacts.length === 0) return out;
    const rows = await runPrepared(
      q,
      "conversations.open-or-touch-many",
      `INSERT INTO ${SCHEMA}.conversations (id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at, created_at, updated_at)
       SELECT c.id, $1, $2, c.contact_id, c.phone, 'open', clock_timestamp(), clock_timestamp(), date_trunc('milliseconds', clock_timestamp()), clock_timestamp()
       FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS c(id, contact_id, phone, ord) ORDER BY c.ord
       ON CONFLICT (channel_id, contact_id) WHERE status = 'open'
       DO UPDATE SET last_message_at = greatest(conversations.last_message_at, EXCLUDED.last_message_at), updated_at = EXCLUDED.updated_at
       RETURNING *, (xmax = 0) AS opened`,
      [input.organizationId, input.channelId, contacts.map(() => newId("conversation")), contacts.map((c) => c.contactId), contacts.map((c) => c.phone)],
    );
    for (const { opened, ...conversation } of rows) out.set(conversation.contact_id, { conversation: conversation as ConversationRow, opened: Boolean(opened) });
    return out;
  },

  /** One page in (createdAt, id) order, after the cursor's position. */
  /** `created_at` is stored at millisecond precision, so the cursor's ISO time is exact. */
  async page(q: Queryable, organizationId: string, limit: number, after?: { createdAt: string; id: string }): Promise<ConversationRow[]> {
    if (after) {
      return run(q, 
        `SELECT * FROM ${SCHEMA}.conversations WHERE organization_id = $1 AND (created_at, id) > ($2::timestamptz, $3)
         ORDER BY created_at, id LIMIT $4`,
        [organizationId, after.createdAt, after.id, limit],
      );
    }
    return run(q, `SELECT * FROM ${SCHEMA}.conversations WHERE organization_id = $1 ORDER BY created_at, id LIMIT $2`, [organizationId, limit]);
  },

  /**
   * One step of the idle sweep: up to `limit` open conversations whose `idle_from` is older than `idleMs` (the
   * candidates, read through the index, in that order); those whose last message is that old too are closed, the
   * others get `idle_from = last_message_at` so that the next steps pass them (ADR 0020). `idle_from` is never later
   * than `last_message_at`, so every idle conversation is a candidate. Rows another transaction holds are left for the
   * next sweep. The cutoff is `now()` (the statement's start, stable), not `clock_timestamp()` (volatile): only a
   * stable cutoff can bound the index scan. `candidates` below `limit` means none is left.
   */
  async closeIdle(q: Queryable, idleMs: number, limit: number): Promise<{ closed: ConversationRow[]; candidates: number }> {
    // The candidates are locked (FOR UPDATE), so the updates read each one's latest `last_message_at`: a touch that
    // committed meanwhile is seen, one still running holds its row and the row is skipped.
    const rows = await run<ConversationRow & { candidates: number }>(q,
      `WITH candidate AS (
         SELECT id FROM ${SCHEMA}.conversations
         WHERE status = 'open' AND idle_from < now() - $1 * interval '1 millisecond'
         ORDER BY idle_from LIMIT $2 FOR UPDATE SKIP LOCKED
       ), refreshed AS (
         UPDATE ${SCHEMA}.conversations c SET idle_from = c.last_message_at
         FROM candidate WHERE c.id = candidate.id AND c.last_message_at >= now() - $1 * interval '1 millisecond'
       ), closed AS (
         UPDATE ${SCHEMA}.conversations c SET status = 'closed', closed_at = clock_timestamp(), updated_at = clock_timestamp()
         FROM candidate WHERE c.id = candidate.id AND c.last_message_at < now() - $1 * interval '1 millisecond' RETURNING c.*
       )
       SELECT closed.*, (SELECT count(*) FROM candidate)::int AS candidates FROM (SELECT 1) one LEFT JOIN closed ON true`,
      [idleMs, limit],
    );
    const candidates = rows[0]?.candidates ?? 0;
    const closed = rows.filter((r) => r.id !== null).map(({ candidates: _, ...r }) => r as ConversationRow);
    return { closed, candidates };
  },
};
