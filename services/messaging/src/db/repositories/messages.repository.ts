import type { OutboxMessage, OutboxOrigin } from "@platform/bus";
import type { InboundExtras } from "@platform/contracts";
import { queryBulk, type BulkTransaction, type DataSource } from "@platform/db";
import { newId } from "@platform/id";
import { currentRateSql } from "./pacing-rate";
import { run, runPrepared, SCHEMA, type Queryable } from "./queryable";
import type { ConversationRow } from "./conversations.repository";
import type { MessageStatus, TemplatePayload } from "../entities/message.entity";

/** An outbound text to store as `pending`, leased to its sender for `leaseMs`. */
export type OutboundInput = {
  id: string;
  organizationId: string;
  channelId: string;
  contactId: string;
  phone: string;
  text: string;
  leaseMs: number;
  /** The request that sends it (its events carry its request id and trace; a statement holds several requests' sends). */
  origin?: OutboxOrigin;
};

/** The origin columns of outbox rows written by a set-based statement, one value per event. */
const originParams = (events: OutboxMessage[]) => [events.map((e) => e.requestId ?? null), events.map((e) => e.traceparent ?? null)];

export interface MessageRow {
  id: string;
  organization_id: string;
  channel_id: string;
  conversation_id: string;
  contact_id: string;
  phone: string;
  direction: "inbound" | "outbound";
  type: string;
  text: string | null;
  button_text: string | null;
  button_payload: string | null;
  status: MessageStatus;
  provider_message_id: string | null;
  provider_timestamp: Date | null;
  template_job_id: string | null;
  send_key: string | null;
  template_payload: TemplatePayload | null;
  error_code: string | null;
  error_title: string | null;
  attempts: number;
  /** Attempts that failed (the backoff's exponent); pacing deferrals not counted. */
  failures: number;
  lease_until: Date | null;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface InboundInsert {
  id: string;
  organizationId: string;
  channelId: string;
  conversationId: string;
  contactId: string;
  phone: string;
  type: string;
  text: string | null;
  buttonText: string | null;
  buttonPayload: string | null;
  /** For the event only (media, location, list reply, reaction): not stored. */
  extras?: InboundExtras;
  providerMessageId: string;
  providerTimestamp: Date;
}

/** An attempt the provider accepted: its message becomes `sent`, with the event. */
export type SentMarkInput = { id: string; attempt: number; providerMessageId: string; event: OutboxMessage };

/** Store part of `writeSendStatement` ($1–$13): pacing, conversations, messages, conversation.opened events. */
const STORE_CTES = `input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::text[], $10::text[], $11::text[],
                         $12::text[], $13::text[])
      AS i(conversation_id, organization_id, channel_id, contact_id, phone, id, text, lease_ms, msg_id, subject, payload, request_id, traceparent)
  ), t AS (
    SELECT clock_timestamp() AS now
  ), demand AS (
    SELECT channel_id, count(*)::int AS n FROM input GROUP BY channel_id
  ), locked AS (
    SELECT p.channel_id FROM ${SCHEMA}.channel_pacing p
    WHERE p.channel_id IN (SELECT channel_id FROM demand) ORDER BY p.channel_id FOR UPDATE
  ), pace AS (
    UPDATE ${SCHEMA}.channel_pacing p
    SET tat = greatest(p.tat, t.now) + d.n * (1.0 / ${currentRateSql("p", "t.now")}) * interval '1 second'
    FROM t, demand d, locked l WHERE p.channel_id = d.channel_id AND l.channel_id = d.channel_id
    RETURNING p.channel_id, (extract(epoch FROM (p.tat - t.now)) * 1000)::float8 AS end_ms,
      (1000.0 / ${currentRateSql("p", "t.now")})::float8 AS interval_ms
  ), conv AS (
    INSERT INTO ${SCHEMA}.conversations (id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at, created_at, updated_at)
    SELECT conversation_id, organization_id, channel_id, contact_id, phone, 'open', clock_timestamp(), clock_timestamp(),
           date_trunc('milliseconds', clock_timestamp()), clock_timestamp()
    -- Reading pace makes the pacing rows be locked first; conversations are then locked in key order.
    FROM input, (SELECT count(*) FROM pace) AS paced
    ORDER BY channel_id, contact_id
    ON CONFLICT (channel_id, contact_id) WHERE status = 'open'
    DO UPDATE SET last_message_at = greatest(conversations.last_message_at, EXCLUDED.last_message_at), updated_at = EXCLUDED.updated_at
    RETURNING id, channel_id, contact_id, (xmax = 0) AS opened
  ), msg AS (
    INSERT INTO ${SCHEMA}.messages (id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, text, status, attempts, lease_until)
    SELECT i.id, i.organization_id, i.channel_id, conv.id, i.contact_id, i.phone, 'outbound', 'text', i.text, 'pending', 1,
           clock_timestamp() + i.lease_ms * interval '1 millisecond'
    FROM input i JOIN conv ON conv.channel_id = i.channel_id AND conv.contact_id = i.contact_id
    RETURNING *
  ), evt AS (
    INSERT INTO ${SCHEMA}.outbox (msg_id, subject, payload, request_id, traceparent)
    SELECT i.msg_id, i.subject, i.payload, i.request_id, i.traceparent FROM input i JOIN conv ON conv.id = i.conversation_id WHERE conv.opened
    RETURNING 1
  )`;

/**
 * Sent part of `writeSendStatement` (eight parameters from $N): messages `sent`
 * and their events; `sent` answers the ids.
 *
 * The expected status comes from `sent_input` (a materialized CTE), not as a
 * literal: with `status = 'pending'` written out, the generic plan could read
 * the partial index `messages_stuck` (WHERE status = 'pending') instead of the
 * primary key, and between two vacuums that index holds an entry for every
 * message sent since (tens of thousands under load): 1,300 heap pages per
 * statement instead of one per message. A join clause cannot prove the index's
 * predicate, so only the primary key serves this update. (Since migration
 * HotStatusUpdates that index is `messages_unsettled`, whose predicate no
 * status condition proves either.)
 */
const sentCtes = (n: number) => `sent_input AS (
    SELECT s.*, 'pending'::text AS from_status
    FROM unnest($${n}::text[], $${n + 1}::int[], $${n + 2}::text[], $${n + 3}::text[], $${n + 4}::text[], $${n + 5}::text[], $${n + 6}::text[], $${n + 7}::text[])
      AS s(id, attempt, provider_message_id, msg_id, subject, payload, request_id, traceparent)
  ), sent AS (
    UPDATE ${SCHEMA}.messages x SET status = 'sent', provider_message_id = s.provider_message_id, lease_until = NULL,
      next_attempt_at = NULL, error_code = NULL, error_title = NULL, updated_at = clock_timestamp()
    FROM sent_input s WHERE x.id = s.id AND x.status = s.from_status AND x.attempts = s.attempt RETURNING x.id
  ), sent_evt AS (
    INSERT INTO ${SCHEMA}.outbox (msg_id, subject, payload, request_id, traceparent)
    SELECT s.msg_id, s.subject, s.payload, s.request_id, s.traceparent FROM sent_input s JOIN sent ON sent.id = s.id RETURNING 1
  )`;

const sentParams = (marks: SentMarkInput[]) => [
  marks.map((m) => m.id),
  marks.map((m) => m.attempt),
  marks.map((m) => m.providerMessageId),
  marks.map((m) => m.event.msgId),
  marks.map((m) => m.event.subject),
  marks.map((m) => JSON.stringify(m.event.payload)),
  ...originParams(marks.map((m) => m.event)),
];

/**
 * Splits new messages into statements in which each (channel, contact) pair
 * appears once: the first of a pair goes in the first round, its repeat in
 * the second, and so on.
 */
export function sendRounds<T extends { channelId: string; contactId: string }>(inputs: T[]): T[][] {
  const rounds: T[][] = [];
  const roundOf = new Map<string, number>();
  for (const m of inputs) {
    const pair = `${m.channelId}|${m.contactId}`;
    const round = (roundOf.get(pair) ?? -1) + 1;
    roundOf.set(pair, round);
    (rounds[round] ??= []).push(m);
  }
  return rounds;
}

/** A template send to store as `pending`, leased to the batch that sends it (attempt 1). */
export type TemplateInput = {
  id: string;
  organizationId: string;
  channelId: string;
  contactId: string;
  phone: string;
  sendKey: string;
  templateJobId: string;
  payload: TemplatePayload;
  leaseMs: number;
};

export const messagesRepository = {
  /** Messages of the organization by id (any direction of status). */
  async findByIds(q: Queryable, organizationId: string, ids: string[]): Promise<MessageRow[]> {
    return run(q, `SELECT * FROM ${SCHEMA}.messages WHERE organization_id = $1 AND id = ANY($2::text[])`, [organizationId, ids]);
  },

  /**
   * Stores one batch of template sends in ONE statement: conversations opened
   * (with `conversation.opened`) or touched, messages `pending` and leased for
   * attempt 1. A key already stored for the organization inserts nothing
   * (unique `messages_send_key`; a racing duplicate waits on the index entry
   * and then skips), so answers only the rows this statement created.
   * A (channel, contact) pair may appear only once (`sendRounds` splits).
   */
  async storeTemplates(
    q: Queryable,
    inputs: TemplateInput[],
    openedEvent: (conversation: Pick<ConversationRow, "id" | "organization_id" | "channel_id" | "contact_id" | "phone">) => OutboxMessage,
  ): Promise<MessageRow[]> {
    if (inputs.length === 0) return [];
    const conversationIds = inputs.map(() => newId("conversation"));
    const events = inputs.map((m, k) =>
      openedEvent({ id: conversationIds[k], organization_id: m.organizationId, channel_id: m.channelId, contact_id: m.contactId, phone: m.phone }),
    );
    return run<MessageRow>(
      q,
      `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::jsonb[], $10::int[],
                              $11::text[], $12::text[], $13::text[], $14::text[], $15::text[])
           AS i(conversation_id, organization_id, channel_id, contact_id, phone, id, send_key, template_job_id, template_payload, lease_ms, msg_id, subject, payload,
                request_id, traceparent)
       ), conv AS (
         INSERT INTO ${SCHEMA}.conversations (id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at, created_at, updated_at)
         SELECT conversation_id, organization_id, channel_id, contact_id, phone, 'open', clock_timestamp(), clock_timestamp(),
                date_trunc('milliseconds', clock_timestamp()), clock_timestamp()
         FROM input ORDER BY channel_id, contact_id
         ON CONFLICT (channel_id, contact_id) WHERE status = 'open'
         DO UPDATE SET last_message_at = greatest(conversations.last_message_at, EXCLUDED.last_message_at), updated_at = EXCLUDED.updated_at
         RETURNING id, channel_id, contact_id, (xmax = 0) AS opened
       ), msg AS (
         INSERT INTO ${SCHEMA}.messages (id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, status, attempts, lease_until,
           send_key, template_job_id, template_payload)
         SELECT i.id, i.organization_id, i.channel_id, conv.id, i.contact_id, i.phone, 'outbound', 'template', 'pending', 1,
                clock_timestamp() + i.lease_ms * interval '1 millisecond', i.send_key, i.template_job_id, i.template_payload
         FROM input i JOIN conv ON conv.channel_id = i.channel_id AND conv.contact_id = i.contact_id
         ORDER BY i.send_key
         ON CONFLICT (organization_id, send_key) WHERE send_key IS NOT NULL DO NOTHING
         RETURNING *
       ), evt AS (
         INSERT INTO ${SCHEMA}.outbox (msg_id, subject, payload, request_id, traceparent)
         SELECT i.msg_id, i.subject, i.payload, i.request_id, i.traceparent FROM input i JOIN conv ON conv.id = i.conversation_id WHERE conv.opened
         RETURNING 1
       )
       SELECT * FROM msg`,
      [
        conversationIds,
        inputs.map((m) => m.organizationId),
        inputs.map((m) => m.channelId),
        inputs.map((m) => m.contactId),
        inputs.map((m) => m.phone),
        inputs.map((m) => m.id),
        inputs.map((m) => m.sendKey),
        inputs.map((m) => m.templateJobId),
        inputs.map((m) => JSON.stringify(m.payload)),
        inputs.map((m) => m.leaseMs),
        events.map((e) => e.msgId),
        events.map((e) => e.subject),
        events.map((e) => JSON.stringify(e.payload)),
        ...originParams(events),
      ],
    );
  },

  /** The organization's messages stored under these send keys. */
  async findBySendKeys(q: Queryable, organizationId: string, keys: string[]): Promise<MessageRow[]> {
    if (keys.length === 0) return [];
    // One probe of the unique (organization_id, send_key) index per key (LIMIT 1 keeps the subquery a per-key lookup).
    // As a plain `send_key = ANY(…)`, the planner, whose statistics lag a table a job fills, read every message of the
    // organization instead: 26 ms per template batch at 50,000 messages.
    return run(
      q,
      `SELECT m.* FROM unnest($2::text[]) AS k(send_key)
       CROSS JOIN LATERAL (SELECT * FROM ${SCHEMA}.messages x WHERE x.organization_id = $1 AND x.send_key = k.send_key LIMIT 1) m`,
      [organizationId, keys],
    );
  },

  /**
   * One write of the send path for many concurrent requests, in ONE statement
   * (one round trip, one commit, all or nothing):
   * - new outbound texts stored as `pending`, each leased to its sender for
   *   its first provider call, with their conversations (opened when none is
   *   open, with `conversation.opened`), and each one's pacing slot reserved
   *   on its channel (the GCRA of ADR 0003: the next `n` emission intervals
   *   per channel). Locks are taken in one order, pacing rows by channel id
   *   and then conversations by (channel, contact), so concurrent batches of
   *   several replicas never deadlock one another;
   * - attempts the provider accepted marked `sent` with their events. A
   *   message whose attempt no longer owns it (settled by a status callback
   *   or another sender) is left alone and gets no event.
   * A (channel, contact) pair may appear only once in `inputs` (an upsert
   * cannot touch one conversation twice in a statement; `sendRounds` splits).
   * Answers, per input in order, the stored message and how long from now its
   * slot comes (ms, 0 when now), and the ids marked sent.
   */
  async writeSendStatement(
    q: Queryable,
    inputs: OutboundInput[],
    marks: SentMarkInput[],
    openedEvent: (conversation: Pick<ConversationRow, "id" | "organization_id" | "channel_id" | "contact_id" | "phone">) => OutboxMessage,
  ): Promise<{ stored: Array<{ message: MessageRow; paceWaitMs: number }>; sentIds: Set<string> }> {
    if (inputs.length === 0) {
      const rows = await runPrepared<{ id: string }>(q, "markSent", `WITH ${sentCtes(1)} SELECT id FROM sent`, sentParams(marks));
      return { stored: [], sentIds: new Set(rows.map((r) => r.id)) };
    }
    const conversationIds = inputs.map(() => newId("conversation"));
    // Each event with the origin of the request that sent its message (the statement runs in the context of the batch's first).
    const events = inputs.map((m, k) => ({
      ...openedEvent({ id: conversationIds[k], organization_id: m.organizationId, channel_id: m.channelId, contact_id: m.contactId, phone: m.phone }),
      ...m.origin,
    }));
    const storeParams = [
      conversationIds,
      inputs.map((m) => m.organizationId),
      inputs.map((m) => m.channelId),
      inputs.map((m) => m.contactId),
      inputs.map((m) => m.phone),
      inputs.map((m) => m.id),
      inputs.map((m) => m.text),
      inputs.map((m) => m.leaseMs),
      events.map((e) => e.msgId),
      events.map((e) => e.subject),
      events.map((e) => JSON.stringify(e.payload)),
      ...originParams(events),
    ];
    const started = Date.now();
    type Row = MessageRow & { pace_end_ms: number | null; pace_interval_ms: number | null; sent_ids?: string[] };
    const rows =
      marks.length > 0
        ? await runPrepared<Row>(
            q,
            "storeOutboundAndMarkSent",
            `WITH ${STORE_CTES}, ${sentCtes(14)}
             SELECT msg.*, pace.end_ms AS pace_end_ms, pace.interval_ms AS pace_interval_ms,
               (SELECT coalesce(array_agg(id), '{}') FROM sent) AS sent_ids
             FROM msg LEFT JOIN pace ON pace.channel_id = msg.channel_id`,
            [...storeParams, ...sentParams(marks)],
          )
        : await runPrepared<Row>(
            q,
            "storeOutbound",
            `WITH ${STORE_CTES}
             SELECT msg.*, pace.end_ms AS pace_end_ms, pace.interval_ms AS pace_interval_ms
             FROM msg LEFT JOIN pace ON pace.channel_id = msg.channel_id`,
            storeParams,
          );
    const elapsed = Date.now() - started;
    const byId = new Map(rows.map((row) => [row.id, row]));
    // Each channel's slots go to its messages in input order: the k-th gets the k-th interval.
    const perChannel = new Map<string, number>();
    for (const m of inputs) perChannel.set(m.channelId, (perChannel.get(m.channelId) ?? 0) + 1);
    const slotOf = new Map<string, number>();
    const stored = inputs.map((m) => {
      const row = byId.get(m.id);
      if (!row) throw new Error(`outbound message ${m.id} was not stored`);
      const { pace_end_ms: endMs, pace_interval_ms: intervalMs, sent_ids: _sent, ...message } = row;
      const k = slotOf.get(m.channelId) ?? 0;
      slotOf.set(m.channelId, k + 1);
      const n = perChannel.get(m.channelId)!;
      const paceWaitMs = endMs === null || intervalMs === null ? 0 : Math.max(0, endMs - (n - k) * intervalMs - elapsed);
      return { message: message as MessageRow, paceWaitMs };
    });
    return { stored, sentIds: new Set(marks.length > 0 ? (rows[0]?.sent_ids ?? []) : []) };
  },

  /**
   * Stores an outbound text as `pending`, leased to the caller for its first
   * provider call (attempt 1): the retry worker leaves it alone until the lease ends.
   */
  async insertOutbound(
    q: Queryable,
    m: { id: string; organizationId: string; channelId: string; conversationId: string; contactId: string; phone: string; text: string; leaseMs: number },
  ): Promise<MessageRow> {
    const rows = await run(q, 
      `INSERT INTO ${SCHEMA}.messages (id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, text, status, attempts, lease_until)
       VALUES ($1, $2, $3, $4, $5, $6, 'outbound', 'text', $7, 'pending', 1, clock_timestamp() + $8 * interval '1 millisecond') RETURNING *`,
      [m.id, m.organizationId, m.channelId, m.conversationId, m.contactId, m.phone, m.text, m.leaseMs],
    );
    return rows[0];
  },

  /** Inserts an inbound message unless its provider id is known; undefined for a duplicate. */
  async insertInbound(q: Queryable, m: InboundInsert): Promise<MessageRow | undefined> {
    const rows = await run(q, 
      `INSERT INTO ${SCHEMA}.messages (id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, text, button_text, button_payload,
         status, provider_message_id, provider_timestamp)
       VALUES ($1, $2, $3, $4, $5, $6, 'inbound', $7, $8, $9, $10, 'received', $11, $12)
       ON CONFLICT (provider_message_id) WHERE direction = 'inbound' DO NOTHING RETURNING *`,
      [m.id, m.organizationId, m.channelId, m.conversationId, m.contactId, m.phone, m.type, m.text, m.buttonText, m.buttonPayload, m.providerMessageId, m.providerTimestamp],
    );
    return rows[0];
  },

  /**
   * Inbound messages of one provider batch in one statement: the messages
   * (a provider id already stored is skipped), each (channel, phone)'s service
   * window moved forward to its latest message, and the events of the
   * messages actually stored (`eventOf` names the message an event belongs
   * to), all in input order. Returns the stored rows.
   */
  async insertInboundBatch(q: Queryable, rows: InboundInsert[], events: Array<OutboxMessage & { messageId: string }>): Promise<MessageRow[]> {
    if (rows.length === 0) return [];
    return runPrepared(
      q,
      "inbound.insert",
      `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                              $11::text[], $12::timestamptz[]) WITH ORDINALITY
           AS i(id, organization_id, channel_id, conversation_id, contact_id, phone, type, text, button_text, button_payload, provider_message_id,
                provider_timestamp, ord)
       ), msg AS (
         INSERT INTO ${SCHEMA}.messages (id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, text, button_text,
           button_payload, status, provider_message_id, provider_timestamp)
         SELECT id, organization_id, channel_id, conversation_id, contact_id, phone, 'inbound', type, text, button_text, button_payload, 'received',
           provider_message_id, provider_timestamp
         FROM input ORDER BY ord
         ON CONFLICT (provider_message_id) WHERE direction = 'inbound' DO NOTHING
         RETURNING *
       ), win AS (
         INSERT INTO ${SCHEMA}.service_windows (channel_id, phone, last_inbound_at)
         SELECT channel_id, phone, max(provider_timestamp) FROM msg GROUP BY channel_id, phone ORDER BY channel_id, phone
         ON CONFLICT (channel_id, phone) DO UPDATE SET last_inbound_at = greatest(service_windows.last_inbound_at, EXCLUDED.last_inbound_at)
         RETURNING 1
       ), evt AS (
         INSERT INTO ${SCHEMA}.outbox (msg_id, subject, payload, request_id, traceparent)
         SELECT e.msg_id, e.subject, e.payload, e.request_id, e.traceparent
         FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[]) WITH ORDINALITY
           AS e(message_id, msg_id, subject, payload, request_id, traceparent, ord)
         WHERE e.message_id IN (SELECT id FROM msg)
         ORDER BY e.ord
         RETURNING 1
       )
       SELECT msg.*, (SELECT count(*) FROM win) AS windows, (SELECT count(*) FROM evt) AS events FROM msg`,
      [
        rows.map((m) => m.id),
        rows.map((m) => m.organizationId),
        rows.map((m) => m.channelId),
        rows.map((m) => m.conversationId),
        rows.map((m) => m.contactId),
        rows.map((m) => m.phone),
        rows.map((m) => m.type),
        rows.map((m) => m.text),
        rows.map((m) => m.buttonText),
        rows.map((m) => m.buttonPayload),
        rows.map((m) => m.providerMessageId),
        rows.map((m) => m.providerTimestamp),
        events.map((e) => e.messageId),
        events.map((e) => e.msgId),
        events.map((e) => e.subject),
        events.map((e) => JSON.stringify(e.payload)),
        ...originParams(events),
      ],
    );
  },

  /** Serializes the handling of these provider message ids across transactions (and replicas), in one order, until commit. */
  async lockInboundIds(q: Queryable, providerMessageIds: string[]): Promise<void> {
    await runPrepared(
      q,
      "inbound.lock",
      `SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT DISTINCT hashtext('messaging.inbound:' || id) AS k FROM unnest($1::text[]) AS id ORDER BY 1 OFFSET 0) AS s`,
      [providerMessageIds],
    );
  },

  /** Outside a transaction on the bulk pool (never the send path's hot pool), or inside the inbound write's. */
  async knownInboundIds(q: DataSource | BulkTransaction, providerMessageIds: string[]): Promise<Set<string>> {
    const rows = await queryBulk<{ provider_message_id: string }>(
      q,
      "messaging.inbound.known",
      `SELECT provider_message_id FROM ${SCHEMA}.messages WHERE direction = 'inbound' AND provider_message_id = ANY($1::text[])`,
      [providerMessageIds],
    );
    return new Set(rows.map((r) => r.provider_message_id));
  },

  async lockById(q: Queryable, id: string): Promise<MessageRow | undefined> {
    const rows = await run(q, `SELECT * FROM ${SCHEMA}.messages WHERE id = $1 FOR UPDATE`, [id]);
    return rows[0];
  },

  /** Takes the lease for the next attempt (the caller holds the row lock). */
  async lease(q: Queryable, id: string, leaseMs: number): Promise<MessageRow> {
    const rows = await run(q, 
      `UPDATE ${SCHEMA}.messages SET attempts = attempts + 1, lease_until = clock_timestamp() + $2 * interval '1 millisecond', updated_at = clock_timestamp()
       WHERE id = $1 RETURNING *`,
      [id, leaseMs],
    );
    return rows[0];
  },

  /** Outcome of attempt `attempt`; undefined when that attempt no longer owns the message (a status callback moved it on). */
  async markSent(q: Queryable, id: string, attempt: number, providerMessageId: string): Promise<MessageRow | undefined> {
    const rows = await run(q, 
      `UPDATE ${SCHEMA}.messages SET status = 'sent', provider_message_id = $3, lease_until = NULL, next_attempt_at = NULL,
         error_code = NULL, error_title = NULL, updated_at = clock_timestamp()
       WHERE id = $1 AND status = 'pending' AND attempts = $2 RETURNING *`,
      [id, attempt, providerMessageId],
    );
    return rows[0];
  },

  /**
   * A single send the stalled-send sweep cancelled because its request died unanswered (`request_abandoned`), whose
   * request's Idempotency-Key has now come back: pending again, due now (the worker's next attempt sends it).
   */
  async reviveAbandoned(q: Queryable, id: string): Promise<MessageRow | undefined> {
    const rows = await run(q,
      `UPDATE ${SCHEMA}.messages SET status = 'pending', error_code = NULL, error_title = NULL, lease_until = NULL,
         next_attempt_at = clock_timestamp(), updated_at = clock_timestamp()
       WHERE id = $1 AND status = 'cancelled' AND error_code = 'request_abandoned' AND template_job_id IS NULL RETURNING *`,
      [id],
    );
    return rows[0];
  },

  async markFailed(q: Queryable, id: string, attempt: number, error: { code: string; title: string }): Promise<MessageRow | undefined> {
    return messagesRepository.settleUnsent(q, id, attempt, "failed", error);
  },

  /** A pending message's attempt `attempt` ends it without a provider answer: `failed`, or `cancelled` (its job's cancel). */
  async settleUnsent(q: Queryable, id: string, attempt: number, status: "failed" | "cancelled", error: { code: string; title: string }): Promise<MessageRow | undefined> {
    const rows = await run(q, 
      `UPDATE ${SCHEMA}.messages SET status = $5, lease_until = NULL, next_attempt_at = NULL, error_code = $3, error_title = $4, updated_at = clock_timestamp()
       WHERE id = $1 AND status = 'pending' AND attempts = $2 RETURNING *`,
      [id, attempt, error.code, error.title, status],
    );
    return rows[0];
  },

  /**
   * A job's sends still `pending` (an attempt running now, or waiting for its retry), through the partial index of
   * unsettled messages: a pending message always has a lease or a next attempt.
   */
  async pendingOfJob(q: Queryable, organizationId: string, templateJobId: string): Promise<Array<{ id: string; leased: boolean }>> {
    return run(
      q,
      `SELECT id, (lease_until IS NOT NULL AND lease_until >= clock_timestamp()) AS leased FROM ${SCHEMA}.messages
       WHERE organization_id = $1 AND template_job_id = $2 AND status = 'pending' AND (lease_until IS NOT NULL OR next_attempt_at IS NOT NULL)`,
      [organizationId, templateJobId],
    );
  },

  /** Ends a job's pending sends that no attempt holds now as `cancelled` with `error` (never sent); answers them. */
  async cancelUnleasedOfJob(q: Queryable, organizationId: string, templateJobId: string, error: { code: string; title: string }): Promise<MessageRow[]> {
    return run(
      q,
      `UPDATE ${SCHEMA}.messages SET status = 'cancelled', lease_until = NULL, next_attempt_at = NULL, error_code = $3, error_title = $4, updated_at = clock_timestamp()
       WHERE organization_id = $1 AND template_job_id = $2 AND status = 'pending' AND (lease_until IS NOT NULL OR next_attempt_at IS NOT NULL)
         AND (lease_until IS NULL OR lease_until < clock_timestamp())
       RETURNING *`,
      [organizationId, templateJobId, error.code, error.title],
    );
  },

  async scheduleRetry(q: Queryable, id: string, attempt: number, delayMs: number, error: { code: string; title: string }, failed: boolean): Promise<MessageRow | undefined> {
    const rows = await run(q, 
      `UPDATE ${SCHEMA}.messages SET lease_until = NULL, next_attempt_at = clock_timestamp() + $3 * interval '1 millisecond',
         error_code = $4, error_title = $5, failures = failures + $6::int, updated_at = clock_timestamp()
       WHERE id = $1 AND status = 'pending' AND attempts = $2 RETURNING *`,
      [id, attempt, delayMs, error.code, error.title, failed ? 1 : 0],
    );
    return rows[0];
  },

  /** Outbound messages of one channel named by a status batch (our id or the provider's), locked in id order. */
  async lockForStatuses(q: Queryable, channelId: string, ids: string[], providerMessageIds: string[]): Promise<MessageRow[]> {
    return run(q, 
      `SELECT * FROM ${SCHEMA}.messages
       WHERE direction = 'outbound' AND channel_id = $1 AND (id = ANY($2::text[]) OR provider_message_id = ANY($3::text[]))
       ORDER BY id FOR UPDATE`,
      [channelId, ids, providerMessageIds],
    );
  },

  /**
   * A provider batch's statuses for one channel, applied in ONE statement with
   * the forward-only rules in SQL. Each status names its message by our id
   * (callback data) or, when that names none, by the provider's id. Per
   * message, in batch order: nothing moves a final message (`read`, `failed`; a `cancelled` one moves as a pending
   * one does: the provider had accepted a call that went unanswered);
   * the first `read` or `failed` of the batch ends it; otherwise it moves to
   * the highest of `sent` < `delivered` it was given, if above where it is.
   * A pending (or cancelled) message the provider turns out to have accepted loses the error of its last attempt
   * (a timeout), as `markSent` does. Rows are locked in id order (concurrent batches never deadlock) and read
   * after the lock, so concurrent batches apply one after the other. Returns
   * the changed rows with their status before the change.
   */
  async applyStatusBatch(
    q: Queryable,
    channelId: string,
    statuses: Array<{ ourId: string | null; providerMessageId: string; status: string; errorCode: string | null; errorTitle: string | null }>,
  ): Promise<Array<MessageRow & { old_status: MessageStatus }>> {
    if (statuses.length === 0) return [];
    return runPrepared(
      q,
      "statuses.apply",
      `WITH input AS (
         SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
           AS s(our_id, pmid, status, error_code, error_title, ord)
         WHERE s.status IN ('sent', 'delivered', 'read', 'failed')
       ), locked AS (
         SELECT m.id, m.status, m.provider_message_id FROM ${SCHEMA}.messages m
         -- The ids first, each way through its own index, then the rows by primary key. Statistics taken while the
         -- table held nearly no outbound rows (analysed after an inbound burst) made any plain "direction = 'outbound'"
         -- here walk the whole outbound partial index as a filter, every outbound row per batch. So that condition
         -- appears only next to the provider id it is the index of; the rows are kept as "<> 'inbound'" (the same
         -- rows, by the table's CHECK), which no partial index matches.
         WHERE m.id = ANY(ARRAY(
             SELECT x.id FROM ${SCHEMA}.messages x WHERE x.id = ANY($2::text[])
             UNION
             SELECT x.id FROM ${SCHEMA}.messages x WHERE x.direction = 'outbound' AND x.provider_message_id = ANY($3::text[])))
           AND m.direction <> 'inbound' AND m.channel_id = $1
         ORDER BY m.id FOR UPDATE
       ), matched AS (
         SELECT l.id, l.status AS old_status, s.*
         FROM input s JOIN locked l ON l.id = coalesce(
           (SELECT b.id FROM locked b WHERE b.id = s.our_id),
           (SELECT b.id FROM locked b WHERE b.provider_message_id = s.pmid ORDER BY b.id LIMIT 1))
       ), per_msg AS (
         SELECT id, min(old_status) AS old_status,
           min(ord) FILTER (WHERE status IN ('read', 'failed')) AS stop_ord,
           max(CASE status WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 END) AS max_rank,
           (array_agg(pmid ORDER BY ord))[1] AS pmid
         FROM matched GROUP BY id
       ), decided AS (
         SELECT p.id, p.old_status, p.pmid, f.error_code, f.error_title,
           CASE
             WHEN p.old_status IN ('read', 'failed') THEN p.old_status
             WHEN p.stop_ord IS NOT NULL THEN f.status
             WHEN p.max_rank > CASE p.old_status WHEN 'pending' THEN 0 WHEN 'cancelled' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 ELSE 3 END
               THEN (ARRAY['sent', 'delivered'])[p.max_rank]
             ELSE p.old_status
           END AS new_status
         FROM per_msg p LEFT JOIN matched f ON f.id = p.id AND f.ord = p.stop_ord
       )
       UPDATE ${SCHEMA}.messages m SET status = d.new_status, provider_message_id = coalesce(m.provider_message_id, d.pmid),
         error_code = CASE WHEN d.new_status = 'failed' THEN d.error_code WHEN d.old_status IN ('pending', 'cancelled') THEN NULL ELSE m.error_code END,
         error_title = CASE WHEN d.new_status = 'failed' THEN d.error_title WHEN d.old_status IN ('pending', 'cancelled') THEN NULL ELSE m.error_title END,
         lease_until = NULL, next_attempt_at = NULL, updated_at = clock_timestamp()
       FROM decided d WHERE m.id = d.id AND d.new_status <> d.old_status
       RETURNING m.*, d.old_status`,
      [
        channelId,
        statuses.map((s) => s.ourId),
        statuses.map((s) => s.providerMessageId),
        statuses.map((s) => s.status),
        statuses.map((s) => s.errorCode),
        statuses.map((s) => s.errorTitle),
      ],
    );
  },

  /** Applies many status changes in one statement. */
  async applyStatuses(
    q: Queryable,
    changes: Array<{ id: string; status: MessageStatus; providerMessageId: string | null; errorCode: string | null; errorTitle: string | null }>,
  ): Promise<void> {
    if (changes.length === 0) return;
    await run(q, 
      `UPDATE ${SCHEMA}.messages m SET status = c.status, provider_message_id = coalesce(m.provider_message_id, c.pmid),
         error_code = coalesce(c.error_code, m.error_code), error_title = coalesce(c.error_title, m.error_title),
         lease_until = NULL, next_attempt_at = NULL, updated_at = clock_timestamp()
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS c(id, status, pmid, error_code, error_title)
       WHERE m.id = c.id`,
      [changes.map((c) => c.id), changes.map((c) => c.status), changes.map((c) => c.providerMessageId), changes.map((c) => c.errorCode), changes.map((c) => c.errorTitle)],
    );
  },
};

/**
 * Pending messages nobody is working on: lease long expired and retry long
 * overdue. A pending row always has a lease or a retry time; the first
 * condition lets the partial index `messages_unsettled` serve the query (its
 * predicate leaves `status` out so that status changes are HOT updates). Their work item was lost (a crash before the outbox relay, or the
 * work stream's retention); the recovery sweep enqueues a new one.
 */
export async function findStalledPending(q: Queryable, graceMs: number, limit: number): Promise<Array<{ id: string; organization_id: string; attempts: number }>> {
  return run(
    q,
    `SELECT id, organization_id, attempts FROM ${SCHEMA}.messages
     WHERE (lease_until IS NOT NULL OR next_attempt_at IS NOT NULL) AND status = 'pending'
       AND coalesce(lease_until, created_at) < clock_timestamp() - $1 * interval '1 millisecond'
       AND (next_attempt_at IS NULL OR next_attempt_at < clock_timestamp() - $1 * interval '1 millisecond')
     ORDER BY lease_until LIMIT $2`,
    [graceMs, limit],
  );
}
