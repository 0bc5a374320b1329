import { Client } from "pg";
import type { MigrationInterface, QueryRunner } from "typeorm";
import { eventSubject, type EventData, type EventType } from "@platform/contracts";
import { newId } from "@platform/id";
import { currentRequestContext, type Logger } from "@platform/logging";
import { extractTrace, traceparentOf } from "@platform/telemetry";
import { BULK_CONNECTION_OPTIONS, queryPrepared, quoteIdent, type SqlRunner } from "@platform/db";
import { ArrivalLinger } from "@platform/runtime";
import { REQUEST_ID_HEADER, type Bus, type PublishItem } from "./bus";

/**
 * Transactional outbox. A state change and the events it causes commit in one
 * transaction (rows in `<schema>.outbox`); the relay publishes them to
 * JetStream with their id as `Nats-Msg-Id` and deletes them. A crash between
 * publish and delete publishes again, which the stream's duplicate window drops.
 */
export interface OutboxMessage {
  subject: string;
  payload: unknown;
  msgId: string;
  /**
   * The request (or bus message) that caused it: its request id and W3C
   * `traceparent`, published with it as headers. `domainEvent` stamps the
   * current request context's; writes that batch several requests together
   * stamp each message with its own request's (`outboxOrigin`).
   */
  requestId?: string | null;
  traceparent?: string | null;
}

/** Where an outbox message comes from: the request id and trace context of a request context. */
export type OutboxOrigin = { requestId: string | null; traceparent: string | null };

/** The current request context's origin (request id, the traceparent of its current span); nulls outside a request. */
export function outboxOrigin(): OutboxOrigin {
  const ctx = currentRequestContext();
  return { requestId: ctx?.requestId ?? null, traceparent: traceparentOf(ctx?.trace) };
}

/** SQL of the outbox table, for each service's first migration. */
export function outboxTableSql(schema: string): { up: string[]; down: string[] } {
  const s = quoteIdent(schema);
  const channel = `${schema}_outbox`;
  return {
    up: [
      `CREATE TABLE ${s}.outbox (
        id bigserial PRIMARY KEY,
        msg_id text NOT NULL,
        subject text NOT NULL,
        payload text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      // One NOTIFY per inserting statement wakes the relay at once; polling is only the safety net.
      `CREATE FUNCTION ${s}.outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('${channel}', ''); RETURN NULL; END $$`,
      `CREATE TRIGGER outbox_notify AFTER INSERT ON ${s}.outbox FOR EACH STATEMENT EXECUTE FUNCTION ${s}.outbox_notify()`,
    ],
    down: [`DROP TABLE ${s}.outbox`, `DROP FUNCTION ${s}.outbox_notify()`],
  };
}

/**
 * A migration adding `request_id` to a schema's outbox (the id of the HTTP
 * request that wrote the row, published as the `X-Request-Id` header). Every
 * service with an outbox lists `outboxRequestIdMigration("<schema>")`.
 */
export function outboxRequestIdMigration(schema: string): new () => MigrationInterface {
  const sql = outboxRequestIdSql(schema);
  return class OutboxRequestId implements MigrationInterface {
    name = "OutboxRequestId1764200000000";
    async up(q: QueryRunner): Promise<void> {
      for (const statement of sql.up) await q.query(statement);
    }
    async down(q: QueryRunner): Promise<void> {
      for (const statement of sql.down) await q.query(statement);
    }
  };
}

/**
 * A migration adding `traceparent` to a schema's outbox (the W3C trace
 * context of the span that wrote the row: the relay's publish continues that
 * trace). Every service with an outbox lists `outboxTraceMigration("<schema>")`
 * after `outboxRequestIdMigration`.
 */
export function outboxTraceMigration(schema: string): new () => MigrationInterface {
  const sql = outboxTraceSql(schema);
  return class OutboxTrace implements MigrationInterface {
    name = "OutboxTrace1764300000000";
    async up(q: QueryRunner): Promise<void> {
      for (const statement of sql.up) await q.query(statement);
    }
    async down(q: QueryRunner): Promise<void> {
      for (const statement of sql.down) await q.query(statement);
    }
  };
}

/** SQL of `outboxTraceMigration`. */
export function outboxTraceSql(schema: string): { up: string[]; down: string[] } {
  const s = quoteIdent(schema);
  return { up: [`ALTER TABLE ${s}.outbox ADD COLUMN traceparent text`], down: [`ALTER TABLE ${s}.outbox DROP COLUMN traceparent`] };
}

/** SQL of `outboxRequestIdMigration`. */
export function outboxRequestIdSql(schema: string): { up: string[]; down: string[] } {
  const s = quoteIdent(schema);
  return { up: [`ALTER TABLE ${s}.outbox ADD COLUMN request_id text`], down: [`ALTER TABLE ${s}.outbox DROP COLUMN request_id`] };
}

/** A domain event ready for the outbox: the webhook body shape, `data.id` = event id = message id. */
export function domainEvent<T extends EventType>(
  type: T,
  organizationId: string,
  data: Omit<EventData<T>, "id">,
  at: Date = new Date(),
): OutboxMessage {
  const id = newId("event");
  return {
    subject: eventSubject(type),
    msgId: id,
    payload: { event: type, timestamp: at.toISOString(), organizationId, data: { id, ...data } },
    ...outboxOrigin(),
  };
}

/**
 * Writes messages to the outbox inside the caller's transaction (one
 * multi-row insert), each with its own origin (`requestId`, `traceparent`)
 * when it has one, else the current request's.
 */
export async function enqueue(manager: SqlRunner, schema: string, messages: OutboxMessage[]): Promise<void> {
  if (messages.length === 0) return;
  let current: OutboxOrigin | undefined;
  const origin = (m: OutboxMessage) => {
    if (m.requestId === undefined || m.traceparent === undefined) current ??= outboxOrigin();
    return { requestId: m.requestId === undefined ? current!.requestId : m.requestId, traceparent: m.traceparent === undefined ? current!.traceparent : m.traceparent };
  };
  const origins = messages.map(origin);
  // One text whatever the count (arrays), so the statement is prepared once per connection; rows in the given order.
  await queryPrepared(
    manager,
    `outbox.enqueue.${schema}`,
    `INSERT INTO ${quoteIdent(schema)}.outbox (msg_id, subject, payload, request_id, traceparent)
     SELECT u.msg_id, u.subject, u.payload, u.request_id, u.traceparent
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(msg_id, subject, payload, request_id, traceparent, ord)
     ORDER BY u.ord`,
    [
      messages.map((m) => m.msgId),
      messages.map((m) => m.subject),
      messages.map((m) => JSON.stringify(m.payload)),
      origins.map((o) => o.requestId),
      origins.map((o) => o.traceparent),
    ],
  );
}

export interface RelayOptions {
  databaseUrl: string;
  schema: string;
  bus: Bus;
  log: Logger;
  batchSize?: number;
  /** Safety-net poll when no NOTIFY arrives. */
  pollMs?: number;
  /**
   * After a wake-up, wait this long so the events of concurrent transactions
   * go out in one batch (one select, one delete) instead of one round trip each.
   * By default read from the gaps between the outbox's recent commits (ADR 0016):
   * about two gaps, 5 to 20 ms, while they stream in; none for a trickle.
   */
  coalesceMs?: number | ArrivalLinger;
  /** How often a replica that is not the relay checks whether it should become it. */
  standbyRetryMs?: number;
}

/** Postgres ends the active relay's session after this long without a query (PostgreSQL 14+). */
const RELAY_IDLE_SESSION_TIMEOUT_MS = 15_000;

type OutboxRow = { id: string; msg_id: string; subject: string; payload: string; request_id: string | null; traceparent: string | null };

/** A schema's outbox as the relay sees it (metrics). */
export interface OutboxBacklog {
  schema: string;
  /** Rows not yet published. */
  depth: number;
  /** Age of the oldest unpublished row; 0 when empty. */
  oldestAgeSeconds: number;
}

/**
 * Publishes a schema's outbox. One replica at a time is the relay: the one
 * whose connection holds the session advisory lock `outbox:<schema>` (the
 * others retry it every `standbyRetryMs` and take over when that connection
 * ends). The relay's own connection listens for the outbox NOTIFY and drains
 * with two prepared statements per batch, select in id order then delete, no
 * transaction and no row locks: nobody else deletes. Publishing before
 * deleting means a crash in between publishes again, which the stream's
 * duplicate window drops.
 */
export class OutboxRelay {
  /** The connection holding the relay role. */
  private client?: Client;
  /** The connection of a replica waiting for the role. */
  private standby?: Client;
  private stopped = false;
  private wake?: () => void;
  private loop?: Promise<void>;
  private pending = false;
  private readonly coalesce: number | ArrivalLinger;
  /** Messages this replica published (metrics). */
  published = 0;

  constructor(private readonly opts: RelayOptions) {
    this.coalesce = opts.coalesceMs ?? new ArrivalLinger();
  }

  /** True while this replica is the schema's relay. */
  get active(): boolean {
    return this.client !== undefined;
  }

  start(): void {
    this.loop = this.run();
  }

  /**
   * Takes the relay role if it is free; false when another replica has it.
   * A standby keeps its connection and asks again on the next call.
   */
  private async takeRole(): Promise<boolean> {
    let client = this.standby;
    if (!client) {
      const fresh = new Client({
        connectionString: this.opts.databaseUrl,
        application_name: `${this.opts.schema}:outbox-relay`,
        // The relay (active or standing by) queries at least every second. Should it vanish without
        // closing its connection (a network partition), the server ends the idle session and frees the role.
        // Its two statements read the outbox by key only: planned once, as the bulk pool's (ADR 0013).
        options: `${BULK_CONNECTION_OPTIONS} -c idle_session_timeout=${RELAY_IDLE_SESSION_TIMEOUT_MS}`,
        keepAlive: true,
      });
      fresh.on("error", () => {
        if (this.client === fresh) this.client = undefined;
        if (this.standby === fresh) this.standby = undefined;
        this.wake?.();
      });
      fresh.on("notification", () => this.poke());
      await fresh.connect();
      client = fresh;
      this.standby = client;
    }
    try {
      const { rows } = await client.query(`SELECT pg_try_advisory_lock(hashtext($1)) AS locked`, [`outbox:${this.opts.schema}`]);
      if (!rows[0].locked) return false;
      await client.query(`LISTEN ${quoteIdent(`${this.opts.schema}_outbox`)}`);
    } catch (err) {
      this.standby = undefined;
      await client.end().catch(() => undefined);
      throw err;
    }
    this.standby = undefined;
    this.client = client;
    return true;
  }

  private poke(): void {
    if (typeof this.coalesce !== "number") this.coalesce.arrived();
    this.pending = true;
    this.wake?.();
  }

  /** Sleeps up to `ms`, or until poked or stopped. */
  private async idle(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = undefined;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      if (!this.client) {
        const taken = await this.takeRole().catch((err: Error) => {
          this.opts.log.warn({ schema: this.opts.schema, err: err.message }, "outbox relay cannot connect; retrying");
          return false;
        });
        if (!taken) {
          await this.idle(this.opts.standbyRetryMs ?? 1_000);
          continue;
        }
        failures = 0;
        this.pending = true;
      }
      let published = 0;
      try {
        this.pending = false;
        published = await this.drainOnce();
        failures = 0;
      } catch (err) {
        failures++;
        this.opts.log.warn({ err: (err as Error).message, failures }, "outbox relay failed, retrying");
        // Give the role up with the connection: another replica (or this one, reconnected) takes over.
        const client = this.client;
        this.client = undefined;
        await client?.end().catch(() => undefined);
        await this.idle(Math.min(5_000, 200 * 2 ** failures));
        continue;
      }
      if (published >= (this.opts.batchSize ?? 500)) continue;
      if (!this.pending) await this.idle(Math.min(this.opts.pollMs ?? 1_000, RELAY_IDLE_SESSION_TIMEOUT_MS / 3));
      const coalesceMs = typeof this.coalesce === "number" ? this.coalesce : this.coalesce.delayMs();
      if (!this.stopped && coalesceMs > 0) await new Promise((r) => setTimeout(r, coalesceMs));
    }
  }

  /** Publishes one batch when this replica is the relay; returns how many messages went out. */
  async drainOnce(): Promise<number> {
    const client = this.client;
    if (!client) return 0;
    const schema = quoteIdent(this.opts.schema);
    const { rows } = await client.query<OutboxRow>({
      name: `outbox.select`,
      text: `SELECT id, msg_id, subject, payload, request_id, traceparent FROM ${schema}.outbox ORDER BY id LIMIT $1`,
      values: [this.opts.batchSize ?? 500],
    });
    if (rows.length === 0) return 0;
    // Publishes are pipelined in id order on one connection, so the stream keeps that order; acks awaited together.
    await this.opts.bus.publishBatch(
      rows.map((r): PublishItem => ({
        subject: r.subject,
        payload: r.payload,
        msgId: r.msg_id,
        headers: r.request_id ? { [REQUEST_ID_HEADER]: r.request_id } : {},
        // The publish continues the trace of the request that wrote the row.
        trace: r.traceparent ? extractTrace((name) => (name === "traceparent" ? r.traceparent : undefined)) : undefined,
      })),
    );
    await client.query({ name: `outbox.delete`, text: `DELETE FROM ${schema}.outbox WHERE id = ANY($1::bigint[])`, values: [rows.map((r) => r.id)] });
    this.published += rows.length;
    return rows.length;
  }

  /** The outbox's depth and oldest age, read on the relay's connection; undefined on a standby replica. */
  async backlog(): Promise<OutboxBacklog | undefined> {
    const client = this.client;
    if (!client) return undefined;
    const { rows } = await client.query<{ depth: string; age: number | null }>(
      `SELECT count(*) AS depth, extract(epoch FROM now() - min(created_at))::float8 AS age FROM ${quoteIdent(this.opts.schema)}.outbox`,
    );
    return { schema: this.opts.schema, depth: Number(rows[0].depth), oldestAgeSeconds: Math.max(0, rows[0].age ?? 0) };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    // One last drain so nothing committed waits for the next start; ending the connection frees the role.
    await this.drainOnce().catch(() => undefined);
    await this.client?.end().catch(() => undefined);
    await this.standby?.end().catch(() => undefined);
    this.client = undefined;
    this.standby = undefined;
  }
}
