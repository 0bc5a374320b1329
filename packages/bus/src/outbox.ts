import { Client } from "pg";
import type { DataSource, EntityManager } from "typeorm";
import { eventSubject, type EventData, type EventType } from "@platform/contracts";
import { newId } from "@platform/id";
import type { Logger } from "@platform/logging";
import { quoteIdent } from "@platform/db";
import type { Bus } from "./bus";

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
  };
}

/** Writes messages to the outbox inside the caller's transaction (one multi-row insert). */
export async function enqueue(manager: EntityManager, schema: string, messages: OutboxMessage[]): Promise<void> {
  if (messages.length === 0) return;
  const params: string[] = [];
  const rows = messages.map((m, i) => {
    params.push(m.msgId, m.subject, JSON.stringify(m.payload));
    return `($${i * 3 + 1}, $${i * 3 + 2}, $${i * 3 + 3})`;
  });
  await manager.query(`INSERT INTO ${quoteIdent(schema)}.outbox (msg_id, subject, payload) VALUES ${rows.join(", ")}`, params);
}

export interface RelayOptions {
  dataSource: DataSource;
  databaseUrl: string;
  schema: string;
  bus: Bus;
  log: Logger;
  batchSize?: number;
  /** Safety-net poll when no NOTIFY arrives (lost listener connection). */
  pollMs?: number;
  /**
   * After a wake-up, wait this long so the events of concurrent transactions
   * go out in one batch (one claim, one delete) instead of one round trip each.
   */
  coalesceMs?: number;
}

export class OutboxRelay {
  private listener?: Client;
  private stopped = false;
  private wake?: () => void;
  private loop?: Promise<void>;
  private pending = false;

  constructor(private readonly opts: RelayOptions) {}

  start(): void {
    this.loop = this.run();
  }

  private async listen(): Promise<void> {
    try {
      const client = new Client({ connectionString: this.opts.databaseUrl });
      client.on("notification", () => this.poke());
      client.on("error", () => {
        this.listener = undefined;
      });
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(`${this.opts.schema}_outbox`)}`);
      this.listener = client;
    } catch (err) {
      this.opts.log.warn({ err: (err as Error).message }, "outbox listener not connected; polling");
    }
  }

  private poke(): void {
    this.pending = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    await this.listen();
    let failures = 0;
    while (!this.stopped) {
      let published = 0;
      try {
        this.pending = false;
        published = await this.drainOnce();
        failures = 0;
      } catch (err) {
        failures++;
        this.opts.log.warn({ err: (err as Error).message, failures }, "outbox relay failed, retrying");
        await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * 2 ** failures)));
        continue;
      }
      if (published >= (this.opts.batchSize ?? 500)) continue;
      if (!this.pending) {
        if (!this.listener && !this.stopped) void this.listen();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.opts.pollMs ?? (this.listener ? 1_000 : 100));
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = undefined;
      }
      if (!this.stopped) await new Promise((r) => setTimeout(r, this.opts.coalesceMs ?? 5));
    }
  }

  /** Publishes one batch; returns how many messages went out. */
  async drainOnce(): Promise<number> {
    const runner = this.opts.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      const rows: Array<{ id: string; msg_id: string; subject: string; payload: string }> = await runner.query(
        `SELECT id, msg_id, subject, payload FROM ${quoteIdent(this.opts.schema)}.outbox
         ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [this.opts.batchSize ?? 500],
      );
      if (rows.length === 0) {
        await runner.commitTransaction();
        return 0;
      }
      // Publishes are pipelined in id order on one connection, so the stream keeps that order.
      await Promise.all(rows.map((r) => this.opts.bus.publish(r.subject, r.payload, { msgId: r.msg_id })));
      await runner.query(`DELETE FROM ${quoteIdent(this.opts.schema)}.outbox WHERE id = ANY($1::bigint[])`, [rows.map((r) => r.id)]);
      await runner.commitTransaction();
      return rows.length;
    } catch (err) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    } finally {
      await runner.release();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    // One last drain so nothing committed waits for the next start.
    await this.drainOnce().catch(() => undefined);
    await this.listener?.end().catch(() => undefined);
  }
}
