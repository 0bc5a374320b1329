import { randomBytes } from "node:crypto";
import { queryBulk, queryPrepared, type SqlRunner } from "@platform/db";
import type { DataSource } from "typeorm";
import { WEBHOOK_DEACTIVATE_AFTER_FAILURES } from "@platform/contracts";

/** Consecutive failed attempts after which a webhook is switched off (service-spec Limits). */
export const DEACTIVATE_AFTER_FAILURES = WEBHOOK_DEACTIVATE_AFTER_FAILURES;

export interface ClaimedJob {
  jobId: string;
  eventId: string;
  webhookId: string;
  organizationId: string;
  attempt: number;
  url: string;
  secret: string;
  event: string;
  body: string;
  /** The trace context of the event that created the job (a first attempt started in this process); none for a job claimed from the table. */
  trace?: import("@platform/telemetry").Context;
}

export interface AttemptRecord {
  deliveryId: string;
  webhookId: string;
  organizationId: string;
  eventId: string;
  event: string;
  attempt: number;
  responseStatus: number | null;
  responseBody: string | null;
  error: string | null;
  durationMs: number | null;
  createdAt: Date;
}

/** What became of one claimed job. */
export interface JobCompletion {
  jobId: string;
  webhookId: string;
  ok: boolean;
  /** Delay before the next attempt, or null when no attempt follows (success or retries exhausted). */
  retryInMs: number | null;
  record: AttemptRecord;
}

export interface DeliveryAttemptRow {
  id: string;
  eventId: string;
  event: string;
  attempt: number;
  createdAt: Date;
  responseStatus: number | null;
  responseBody: string | null;
  error: string | null;
  durationMs: number | null;
}

/** The attempt log is kept this long. */
export const ATTEMPT_LOG_RETENTION_MS = 30 * 24 * 3_600_000;
const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

/**
 * The smallest attempt id (`dlv_` + lowercase ULID, as `newId("delivery")` issues) of an attempt started at or after
 * `at`: every id issued before `at` sorts below it. A ULID starts with its millisecond time in 10 base-32 digits.
 */
export function attemptIdBefore(at: Date): string {
  let ms = Math.max(0, at.getTime());
  let time = "";
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[ms % 32] + time;
    ms = Math.floor(ms / 32);
  }
  return `dlv_${time}${"0".repeat(16)}`;
}

/** Events owed, durable delivery jobs and the attempt log. Every hot path is one set-based statement. */
/** The attempt log's columns of `records`, as the array parameters $1 to $11 of the statements that write it. */
function attemptColumns(records: AttemptRecord[]): unknown[] {
  return [
    records.map((r) => r.deliveryId),
    records.map((r) => r.webhookId),
    records.map((r) => r.organizationId),
    records.map((r) => r.eventId),
    records.map((r) => r.event),
    records.map((r) => r.attempt),
    records.map((r) => r.responseStatus),
    records.map((r) => r.responseBody),
    records.map((r) => r.error),
    records.map((r) => r.durationMs),
    records.map((r) => r.createdAt.toISOString()),
  ];
}

export class DeliveryRepository {
  /**
   * The process these leases belong to (one repository per process): jobs it ingests leased or claims name it, and
   * its beat in `dispatchers` keeps them (ADR 0019).
   */
  readonly owner = `dispatcher_${randomBytes(9).toString("hex")}`;

  constructor(private readonly db: DataSource) {}

  /** This process is alive for `ttlMs` more. */
  async beat(ttlMs: number): Promise<void> {
    await queryPrepared(
      this.db,
      "webhooks.beat",
      `INSERT INTO webhooks.dispatchers (owner, alive_until) VALUES ($1, clock_timestamp() + $2::int * interval '1 millisecond')
       ON CONFLICT (owner) DO UPDATE SET alive_until = EXCLUDED.alive_until`,
      [this.owner, ttlMs],
    );
  }

  /**
   * The leases of processes whose beat stopped (their `alive_until` passed): their jobs are due now, for any live
   * process to claim. One statement; the jobs table is only read when such a process exists. Returns the jobs freed.
   */
  async freeDeadLeases(): Promise<number> {
    const rows = await queryPrepared<{ freed: string }>(
      this.db,
      "webhooks.free-dead-leases",
      `WITH dead AS (
         DELETE FROM webhooks.dispatchers WHERE alive_until < clock_timestamp() AND owner <> $1 RETURNING owner
       ), freed AS (
         UPDATE webhooks.delivery_jobs j SET due_at = now(), lease_owner = NULL
         WHERE EXISTS (SELECT 1 FROM dead) AND j.lease_owner IN (SELECT owner FROM dead) AND j.due_at > now()
         RETURNING 1
       )
       SELECT count(*)::text AS freed FROM freed`,
      [this.owner],
    );
    return Number(rows[0]?.freed ?? 0);
  }

  /** This process stopped: its row goes (its leases were released or finished). */
  async leave(): Promise<void> {
    await this.db.query(`DELETE FROM webhooks.dispatchers WHERE owner = $1`, [this.owner]);
  }

  /**
   * Stores a batch of events and one job per (event, active webhook of its
   * organization subscribed to its type), in one statement (so one
   * transaction, one commit for the whole batch). Idempotent: an event seen
   * before (a JetStream redelivery) creates nothing, even when its deliveries
   * are already done. Events nobody subscribes to are not stored.
   *
   * Jobs of webhooks with room in this process (`busy` below `capacity`) are
   * created already leased to it and returned, so their first attempt starts
   * without another round trip; the rest are created due, for the claim loop.
   */
  async ingest(
    events: Array<{ id: string; organizationId: string; event: string; body: string; occurredAt: string }>,
    lease: { busy: Map<string, number>; capacity: number; leaseMs: number },
  ): Promise<Array<{ jobId: string; eventId: string; webhookId: string; organizationId: string; attempt: number; leased: boolean; url: string; secret: string }>> {
    if (events.length === 0) return [];
    return queryBulk(
      this.db,
      "webhooks.ingest",
      `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $9::timestamptz[]) WITH ORDINALITY AS i(id, organization_id, event, body, occurred_at, ord)
       ), busy AS (
         SELECT * FROM unnest($5::text[], $6::int[]) AS b(webhook_id, n)
       ), targets AS (
         SELECT i.id AS event_id, w.id AS webhook_id, i.organization_id, i.ord
         FROM input i JOIN webhooks.webhooks w ON w.organization_id = i.organization_id AND w.active AND i.event = ANY(w.events)
           -- A webhook gets the events that happen after it exists (a few seconds of clock skew allowed),
           -- not the stream's history when the dispatcher's consumer starts fresh.
           AND w.created_at <= i.occurred_at + interval '5 seconds'
       ), stored AS (
         INSERT INTO webhooks.events (id, organization_id, event, body)
         SELECT i.id, i.organization_id, i.event, i.body FROM input i
         WHERE EXISTS (SELECT 1 FROM targets t WHERE t.event_id = i.id)
         ON CONFLICT (id) DO NOTHING
         RETURNING id
       ), fresh AS (
         SELECT t.event_id, t.webhook_id, t.organization_id,
                row_number() OVER (PARTITION BY t.webhook_id ORDER BY t.ord) + COALESCE(b.n, 0) AS slot
         FROM targets t JOIN stored s ON s.id = t.event_id LEFT JOIN busy b ON b.webhook_id = t.webhook_id
       ), inserted AS (
         INSERT INTO webhooks.delivery_jobs (event_id, webhook_id, organization_id, attempt, due_at, lease_owner)
         SELECT event_id, webhook_id, organization_id, 1,
                CASE WHEN slot <= $7 THEN now() + ($8::int * interval '1 millisecond') ELSE now() END,
                CASE WHEN slot <= $7 THEN $10 END
         FROM fresh
         ON CONFLICT (event_id, webhook_id) DO NOTHING
         RETURNING id, event_id, webhook_id, organization_id, attempt, due_at > now() AS leased
       )
       SELECT j.id::text AS "jobId", j.event_id AS "eventId", j.webhook_id AS "webhookId", j.organization_id AS "organizationId",
              j.attempt, j.leased, w.url, w.secret
       FROM inserted j JOIN webhooks.webhooks w ON w.id = j.webhook_id`,
      [
        events.map((e) => e.id),
        events.map((e) => e.organizationId),
        events.map((e) => e.event),
        events.map((e) => e.body),
        [...lease.busy.keys()],
        [...lease.busy.values()],
        lease.capacity,
        lease.leaseMs,
        events.map((e) => e.occurredAt),
        this.owner,
      ],
    );
  }

  /**
   * Claims due jobs by pushing their `due_at` past the attempt (a lease: a
   * worker that dies mid-attempt leaves the job to be claimed again when the
   * lease ends). Candidates are read without locks; only the rows updated are
   * locked, and the update re-checks `due_at`, so two replicas never take one job. Webhooks already at their in-flight bound in this process are
   * skipped, and at most `perWebhook - inFlight` jobs of each are taken, so
   * one slow endpoint's backlog never fills the batch (no head-of-line blocking).
   */
  async claim(args: { limit: number; perWebhook: number; busy: Map<string, number>; leaseMs: number }): Promise<ClaimedJob[]> {
    const busyIds: string[] = [];
    const busyCounts: number[] = [];
    const saturated: string[] = [];
    for (const [id, n] of args.busy) {
      busyIds.push(id);
      busyCounts.push(n);
      if (n >= args.perWebhook) saturated.push(id);
    }
    const rows = await queryPrepared<ClaimedJob>(
      this.db,
      "webhooks.claim",
      `WITH busy AS (
         SELECT * FROM unnest($1::text[], $2::int[]) AS b(webhook_id, n)
       ), candidates AS (
         SELECT j.id, j.webhook_id, j.due_at
         FROM webhooks.delivery_jobs j
         WHERE j.due_at <= now() AND NOT (j.webhook_id = ANY($3::text[]))
           -- Jobs of a webhook deleted or deactivated while they were being created (no foreign key: ADR 0012)
           -- are never taken, so they must not fill the candidates either; pruning deletes them.
           AND EXISTS (SELECT 1 FROM webhooks.webhooks w WHERE w.id = j.webhook_id AND w.active)
         ORDER BY j.due_at
         LIMIT $4
       ), ranked AS (
         SELECT c.id, c.due_at,
                row_number() OVER (PARTITION BY c.webhook_id ORDER BY c.due_at, c.id) + COALESCE(b.n, 0) AS slot
         FROM candidates c LEFT JOIN busy b ON b.webhook_id = c.webhook_id
       ), picked AS (
         SELECT id FROM ranked WHERE slot <= $5 ORDER BY due_at, id LIMIT $6
       )
       UPDATE webhooks.delivery_jobs j
       SET due_at = now() + ($7::int * interval '1 millisecond'), lease_owner = $8
       FROM webhooks.webhooks w, webhooks.events e
       WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND w.id = j.webhook_id AND e.id = j.event_id AND w.active
         -- Re-checked on the row version that wins a race with another replica: a job
         -- claimed meanwhile has its due_at in the future and is skipped, never taken twice.
         AND j.due_at <= now()
       RETURNING j.id::text AS "jobId", j.event_id AS "eventId", j.webhook_id AS "webhookId",
                 j.organization_id AS "organizationId", j.attempt, w.url, w.secret, e.event, e.body`,
      [busyIds, busyCounts, saturated, Math.min(Math.max(args.limit * 2, 100), 500), args.perWebhook, args.limit, args.leaseMs, this.owner],
    );
    return rows;
  }

  /**
   * Records a batch of finished attempts in one statement: the attempt log,
   * the jobs (done, or rescheduled for their next attempt) and the webhooks'
   * consecutive-failure counts (in completion order: a 2xx resets, each
   * failure adds one). A webhook reaching the threshold is deactivated and
   * its pending jobs dropped. Returns the webhooks deactivated by this batch.
   */
  async complete(batch: JobCompletion[]): Promise<string[]> {
    if (batch.length === 0) return [];
    const counters = new Map<string, { reset: boolean; n: number }>();
    for (const c of batch) {
      const cur = counters.get(c.webhookId) ?? { reset: false, n: 0 };
      if (c.ok) counters.set(c.webhookId, { reset: true, n: 0 });
      else counters.set(c.webhookId, { reset: cur.reset, n: cur.n + 1 });
    }
    const done = batch.filter((c) => c.retryInMs === null).map((c) => c.jobId);
    const retries = batch.filter((c) => c.retryInMs !== null);
    const ids = [...counters.keys()];
    const records = batch.map((c) => c.record);
    // ONE statement (its own transaction): the attempt log, the finished jobs, the retries and the failure counts.
    // It was five round trips (BEGIN, four statements, COMMIT) per completed batch, each a socket write and a wake-up
    // on both sides. A retried job of a webhook this batch deactivates is dropped, not rescheduled (as before, when
    // the drop came after the retry); no row is changed twice in the statement.
    const deactivated = await queryBulk<{ id: string }>(
      this.db,
      "webhooks.complete",
      `WITH attempts AS (
         INSERT INTO webhooks.delivery_attempts
           (id, webhook_id, organization_id, event_id, event, attempt, response_status, response_body, error, duration_ms, created_at)
         SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::text[], $9::text[], $10::int[], $11::timestamptz[])
           AS u(id, webhook_id, organization_id, event_id, event, attempt, response_status, response_body, error, duration_ms, created_at)
         WHERE EXISTS (SELECT 1 FROM webhooks.webhooks w WHERE w.id = u.webhook_id)
       ), done AS (
         DELETE FROM webhooks.delivery_jobs WHERE id = ANY($12::bigint[])
       ), u AS (
         SELECT * FROM unnest($15::text[], $16::bool[], $17::int[]) AS u(id, reset, n)
       ), counted AS (
         SELECT w.id, CASE WHEN u.reset THEN u.n ELSE w.consecutive_failures + u.n END AS failures
         FROM webhooks.webhooks w JOIN u ON u.id = w.id
         WHERE w.active AND (u.n > 0 OR w.consecutive_failures <> 0)
       ), updated AS (
         UPDATE webhooks.webhooks w
         -- Counted up to the deactivation: attempts in flight with the 10th (the endpoint's concurrency) add nothing.
         SET consecutive_failures = LEAST(c.failures, $18),
             active = c.failures < $18,
             deactivated_at = CASE WHEN c.failures >= $18 THEN now() ELSE NULL END,
             updated_at = now()
         FROM counted c WHERE w.id = c.id
         RETURNING w.id, w.active
       ), retried AS (
         UPDATE webhooks.delivery_jobs j
         SET attempt = j.attempt + 1, due_at = now() + (r.delay_ms * interval '1 millisecond'), lease_owner = NULL
         FROM unnest($13::bigint[], $14::int[]) AS r(id, delay_ms)
         WHERE j.id = r.id AND NOT EXISTS (SELECT 1 FROM updated x WHERE x.id = j.webhook_id AND NOT x.active)
       ), dropped AS (
         DELETE FROM webhooks.delivery_jobs j USING updated x
         WHERE j.webhook_id = x.id AND NOT x.active AND NOT (j.id = ANY($12::bigint[]))
       )
       SELECT id FROM updated WHERE NOT active`,
      [
        ...attemptColumns(records),
        done,
        retries.map((c) => c.jobId),
        retries.map((c) => c.retryInMs),
        ids,
        ids.map((id) => counters.get(id)!.reset),
        ids.map((id) => counters.get(id)!.n),
        DEACTIVATE_AFTER_FAILURES,
      ],
    );
    return deactivated.map((r) => r.id);
  }

  /** The attempt log; rows of a webhook deleted meanwhile are skipped. */
  async insertAttempts(m: SqlRunner, records: AttemptRecord[]): Promise<void> {
    if (records.length === 0) return;
    await queryPrepared(
      m,
      "webhooks.attempts-insert",
      `INSERT INTO webhooks.delivery_attempts
         (id, webhook_id, organization_id, event_id, event, attempt, response_status, response_body, error, duration_ms, created_at)
       SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::text[], $9::text[], $10::int[], $11::timestamptz[])
         AS u(id, webhook_id, organization_id, event_id, event, attempt, response_status, response_body, error, duration_ms, created_at)
       WHERE EXISTS (SELECT 1 FROM webhooks.webhooks w WHERE w.id = u.webhook_id)`,
      attemptColumns(records),
    );
  }

  /** The attempt log row of a `webhook.test` (no job, no failure count). */
  async recordTest(record: AttemptRecord): Promise<void> {
    await this.insertAttempts(this.db, [record]);
  }

  /** Jobs whose attempt was cut short by a shutdown: due again at once, not counted as failures. */
  async release(jobIds: string[]): Promise<void> {
    if (jobIds.length === 0) return;
    await this.db.query(`UPDATE webhooks.delivery_jobs SET due_at = now(), lease_owner = NULL WHERE id = ANY($1::bigint[])`, [jobIds]);
  }

  /** Newest first; the cursor is the last id of the previous page. */
  async listAttempts(organizationId: string, webhookId: string, limit: number, beforeId?: string): Promise<DeliveryAttemptRow[]> {
    const rows: Array<Record<string, unknown>> = await this.db.query(
      `SELECT id, event_id AS "eventId", event, attempt, created_at AS "createdAt", response_status AS "responseStatus",
              response_body AS "responseBody", error, duration_ms AS "durationMs"
       FROM webhooks.delivery_attempts
       WHERE organization_id = $1 AND webhook_id = $2 AND ($3::text IS NULL OR id < $3)
       ORDER BY id DESC
       LIMIT $4`,
      [organizationId, webhookId, beforeId ?? null, limit],
    );
    return rows.map((r) => ({ ...(r as unknown as DeliveryAttemptRow), createdAt: new Date(r.createdAt as string | Date) }));
  }

  /**
   * Retention: events nobody is owed any more after 7 days, attempt log after 30 days, leftovers of inactive or
   * deleted webhooks (jobs created while the webhook was being deactivated or deleted: no foreign key, ADR 0012).
   */
  async prune(): Promise<void> {
    await this.db.query(
      `DELETE FROM webhooks.delivery_jobs j
       WHERE NOT EXISTS (SELECT 1 FROM webhooks.webhooks w WHERE w.id = j.webhook_id AND w.active)`,
    );
    await this.db.query(
      `DELETE FROM webhooks.events e WHERE e.created_at < now() - interval '7 days'
         AND NOT EXISTS (SELECT 1 FROM webhooks.delivery_jobs j WHERE j.event_id = e.id)`,
    );
    // By id (time-sortable, issued when the attempt started), through the primary key: no index on created_at
    // to maintain on every delivery for a deletion every 10 minutes (ADR 0012).
    await this.db.query(`DELETE FROM webhooks.delivery_attempts WHERE id < $1`, [attemptIdBefore(new Date(Date.now() - ATTEMPT_LOG_RETENTION_MS))]);
  }
}
