import type { OutboundStatus } from "@platform/contracts";

/** What analytics counts: the outbound statuses, and `cancelled` (a template send its job's cancel ended unsent). */
export type AnalyticsStatus = OutboundStatus | "cancelled";

/**
 * Forward-only order (contract section 2): a status replaces a lower one only; read and failed are final. `cancelled`
 * shares rank 0 with `pending` and replaces it by name in `apply_message_statuses`; any provider status replaces it (a
 * call that went unanswered had been accepted after all). Pending and cancelled facts come on feeds of their own, so
 * one batch never holds both for a message.
 */
export const STATUS_RANK: Record<AnalyticsStatus, number> = { pending: 0, cancelled: 0, sent: 1, delivered: 2, read: 3, failed: 3 };

/** One message status event as analytics needs it. */
export interface StatusEvent {
  organizationId: string;
  messageId: string;
  /** ISO 8601 `createdAt` of the message. */
  createdAt: string;
  status: AnalyticsStatus;
}

/** Anything that runs SQL: a DataSource, an EntityManager inside a transaction, a QueryRunner. */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<any>;
}

/**
 * Keeps, per message, the event that wins under the forward-only rule: the
 * highest rank, and among two finals (read, failed) the first in stream
 * order. One row per message is what the set-based upsert needs.
 */
export function reduceBatch(events: StatusEvent[]): StatusEvent[] {
  const byMessage = new Map<string, StatusEvent>();
  for (const e of events) {
    const key = `${e.organizationId}\u0000${e.messageId}`;
    const seen = byMessage.get(key);
    if (!seen || STATUS_RANK[e.status] > STATUS_RANK[seen.status]) byMessage.set(key, e);
  }
  return [...byMessage.values()];
}

/**
 * Applies a batch of status events in the caller's transaction with the one
 * set-based statement (analytics.apply_message_statuses): message rows move
 * forward only, and the hour, day and month buckets move by exactly the
 * transitions that happened. Returns how many messages changed. Applying the
 * same events again (redelivery, duplicates) changes nothing.
 */
export async function applyStatusEvents(db: Queryable, events: StatusEvent[]): Promise<number> {
  const rows = reduceBatch(events);
  if (rows.length === 0) return 0;
  const [r] = await db.query(
    `SELECT analytics.apply_message_statuses($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::smallint[]) AS changed`,
    [
      rows.map((e) => e.organizationId),
      rows.map((e) => e.messageId),
      rows.map((e) => e.createdAt),
      rows.map((e) => e.status),
      rows.map((e) => STATUS_RANK[e.status]),
    ],
  );
  return Number(r.changed);
}
