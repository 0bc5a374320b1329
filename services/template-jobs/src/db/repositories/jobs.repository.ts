import type { TemplateStatus } from "@platform/contracts";
import { organizationActive } from "./organizations.repository";
import { run, SCHEMA, type Queryable } from "./queryable";

/** Where a recipient's send ended: counted `sent`, `failed` or `skipped`; `cancelled` (never sent, by the job's cancel) uncounted. */
export type FinalState = "sent" | "failed" | "skipped" | "cancelled";

export interface JobRow {
  id: string;
  organization_id: string;
  template_id: string;
  messaging_channel_id: string;
  status: "queued" | "running" | "paused" | "completed" | "cancelled" | "failed";
  header_media: { url: string; fileName?: string } | null;
  recipients: number;
  sent: number;
  failed: number;
  skipped: number;
  scheduled_for: Date | null;
  throttle_per_hour: number | null;
  next_slot_at: Date | null;
  opt_outs_checked: boolean;
  lease_owner: string | null;
  lease_until: Date | null;
  run_after: Date | null;
  settle_after: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  failure_reason: string | null;
  /** How a job a run holds is to end: it takes that status when the run lets go, its batches in flight recorded (ADR 0023). */
  stop_as: "cancelled" | "failed" | null;
  created_at: Date;
  /** The request that created the job (its run continues its request id and trace). */
  request_id: string | null;
  traceparent: string | null;
}

export interface RecipientRow {
  job_id: string;
  seq: number;
  phone: string;
  contact_id: string | null;
  body_parameters: string[];
  button_parameters: Array<{ type: "quick_reply"; payload: string; index?: number } | { type: "url"; text: string; index?: number }>;
  state: "pending" | "sending" | "waiting" | FinalState;
  message_id: string | null;
  slot_at: Date | null;
}

/** A recipient as the request gave it (phone already normalized). */
export interface NewRecipient {
  phone: string;
  contactId?: string;
  bodyParameters?: string[];
  buttonParameters?: RecipientRow["button_parameters"];
}

/**
 * Rows per INSERT … SELECT FROM jsonb_array_elements(…): a handful of statements for 50,000 recipients, never one per
 * recipient, and a bounded piece of the request in memory at a time.
 */
const INSERT_CHUNK = 10_000;

export const FINAL_JOB_STATES = ["completed", "cancelled", "failed"] as const;

/** SQL condition on jobs alias `t`: the job is due (queued or running, past its schedule and `run_after`, not stopping) and nobody holds it. */
const unownedDue = (t: string) => `${t}.status IN ('queued', 'running') AND ${t}.stop_as IS NULL
  AND (${t}.scheduled_for IS NULL OR ${t}.scheduled_for <= clock_timestamp())
  AND (${t}.run_after IS NULL OR ${t}.run_after <= clock_timestamp())
  AND (${t}.lease_until IS NULL OR ${t}.lease_until < clock_timestamp())
  AND ${organizationActive(`${t}.organization_id`)}`;

/** SQL condition on the jobs row: a run (or a cancel) holds it, with a live lease. */
const HELD = `lease_owner IS NOT NULL AND lease_until >= clock_timestamp()`;
/** SQL condition on the jobs row: a recipient is left `sending` (a batch whose answer never came; ADR 0018's sweep settles it). */
const HAS_SENDING = `EXISTS (SELECT 1 FROM ${SCHEMA}.job_recipients r WHERE r.job_id = jobs.id AND r.state = 'sending')`;

/**
 * SET list of a statement that lets go of a job: a stop asked while it was held (`stop_as`) becomes its status now,
 * completed now; recipients left `sending` (a batch whose answer never came) are settled by the sweep (ADR 0018).
 */
const APPLY_STOP = `status = COALESCE(stop_as, status),
  completed_at = CASE WHEN stop_as IS NOT NULL THEN now() ELSE completed_at END,
  updated_at = CASE WHEN stop_as IS NOT NULL THEN now() ELSE updated_at END,
  settle_after = CASE WHEN stop_as IS NOT NULL AND ${HAS_SENDING} THEN clock_timestamp() ELSE settle_after END,
  stop_as = NULL`;

export const jobsRepository = {
  async insert(
    q: Queryable,
    job: Pick<JobRow, "id" | "organization_id" | "template_id" | "messaging_channel_id" | "header_media" | "recipients" | "scheduled_for" | "throttle_per_hour"> &
      Partial<Pick<JobRow, "request_id" | "traceparent" | "skipped">>,
  ): Promise<JobRow> {
    const rows = await run<JobRow>(
      q,
      `INSERT INTO ${SCHEMA}.jobs (id, organization_id, template_id, messaging_channel_id, status, header_media, recipients, scheduled_for, throttle_per_hour,
         request_id, traceparent, skipped)
       VALUES ($1, $2, $3, $4, 'queued', $5::jsonb, $6, $7, $8, $9, $10, $11) RETURNING *`,
      [job.id, job.organization_id, job.template_id, job.messaging_channel_id, job.header_media === null ? null : JSON.stringify(job.header_media),
        job.recipients, job.scheduled_for, job.throttle_per_hour, job.request_id ?? null, job.traceparent ?? null, job.skipped ?? 0],
    );
    return rows[0];
  },

  /**
   * The recipients in bulk (seq is the position in the request): each chunk one JSON array parameter, made by
   * JSON.stringify into one flat string and unnested server-side. Text-array parameters instead cost node-pg a string
   * concatenation per element, and a 16 MB request's million body parameters then ran the service out of heap.
   * Entries in `duplicates` (by index) are stored `skipped` with error code DUPLICATE_PHONE: never claimed, never sent.
   */
  async insertRecipients(q: Queryable, jobId: string, recipients: NewRecipient[], duplicates: ReadonlySet<number> = new Set()): Promise<void> {
    for (let start = 0; start < recipients.length; start += INSERT_CHUNK) {
      const rows = JSON.stringify(
        recipients
          .slice(start, start + INSERT_CHUNK)
          .map((r, i) => [r.phone, r.contactId ?? null, r.bodyParameters ?? [], r.buttonParameters ?? [], duplicates.has(start + i) ? 1 : 0]),
      );
      await run(
        q,
        `INSERT INTO ${SCHEMA}.job_recipients (job_id, seq, phone, contact_id, body_parameters, button_parameters, state, error_code)
         SELECT $1, $2::int + n - 1, r->>0, r->>1, r->2, r->3,
           CASE WHEN (r->>4)::int = 1 THEN 'skipped' ELSE 'pending' END, CASE WHEN (r->>4)::int = 1 THEN 'DUPLICATE_PHONE' END
         FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS t(r, n)`,
        [jobId, start, rows],
      );
    }
  },

  async byId(q: Queryable, organizationId: string, id: string): Promise<JobRow | null> {
    const rows = await run<JobRow>(q, `SELECT * FROM ${SCHEMA}.jobs WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ?? null;
  },

  /** One page of the organization's jobs, newest first (ids are ULIDs: their order is creation order). */
  async pageNewestFirst(q: Queryable, organizationId: string, beforeId: string | null, limit: number): Promise<JobRow[]> {
    return beforeId
      ? run<JobRow>(q, `SELECT * FROM ${SCHEMA}.jobs WHERE organization_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, [organizationId, beforeId, limit])
      : run<JobRow>(q, `SELECT * FROM ${SCHEMA}.jobs WHERE organization_id = $1 ORDER BY id DESC LIMIT $2`, [organizationId, limit]);
  },

  /**
   * Asks an unfinished job to end as `as` (ADR 0023). Held by a run: the job keeps its status, and the run applies the
   * stop when it lets go, once its batches in flight are recorded. Held by nobody: `owner` takes it (a lease of
   * `leaseMs`), to apply the stop itself (`release`). Answers the job as it now is, whether this call asked the stop
   * (false: already final, or already stopping), and null when there is no such job.
   */
  async requestStop(
    q: Queryable,
    organizationId: string,
    id: string,
    as: "cancelled" | "failed",
    owner: string,
    leaseMs: number,
    reason: string | null = null,
  ): Promise<{ row: JobRow; requested: boolean } | null> {
    const rows = await run<JobRow>(
      q,
      `UPDATE ${SCHEMA}.jobs SET stop_as = $3, failure_reason = COALESCE($6, failure_reason), updated_at = now(),
         lease_owner = CASE WHEN ${HELD} THEN lease_owner ELSE $4 END,
         lease_until = CASE WHEN ${HELD} THEN lease_until ELSE clock_timestamp() + $5 * interval '1 millisecond' END
       WHERE organization_id = $1 AND id = $2 AND status IN ('queued', 'running', 'paused') AND stop_as IS NULL RETURNING *`,
      [organizationId, id, as, owner, leaseMs, reason],
    );
    if (rows[0]) return { row: rows[0], requested: true };
    const row = await this.byId(q, organizationId, id);
    return row && { row, requested: false };
  },

  /** The stop of a job whose holder did not let go in time takes effect now; the sweep settles that run's batches once its lease is over. */
  async forceStop(q: Queryable, id: string): Promise<void> {
    await run(
      q,
      `UPDATE ${SCHEMA}.jobs SET status = stop_as, stop_as = NULL, completed_at = now(), updated_at = now(),
         settle_after = greatest(clock_timestamp(), lease_until)
       WHERE id = $1 AND stop_as IS NOT NULL`,
      [id],
    );
  },

  /**
   * Takes, for `owner`, a job asked to stop whose holder died (its lease ran out before it let go): the taker records
   * what that run left unrecorded, then lets go, and the stop takes effect (`release`). Null when there is none.
   */
  async claimAbandonedStop(q: Queryable, owner: string, leaseMs: number): Promise<JobRow | null> {
    const rows = await run<JobRow>(
      q,
      `UPDATE ${SCHEMA}.jobs j SET lease_owner = $1, lease_until = clock_timestamp() + $2 * interval '1 millisecond'
       WHERE j.id = (SELECT id FROM ${SCHEMA}.jobs WHERE stop_as IS NOT NULL AND (lease_until IS NULL OR lease_until < clock_timestamp())
                     ORDER BY lease_until NULLS FIRST LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING j.*`,
      [owner, leaseMs],
    );
    return rows[0] ?? null;
  },

  /** Keeps the job held by `owner` for `ms` more (and no longer): a taker that could not finish tries again after. */
  async holdFor(q: Queryable, id: string, owner: string, ms: number): Promise<void> {
    await run(q, `UPDATE ${SCHEMA}.jobs SET lease_until = clock_timestamp() + $3 * interval '1 millisecond' WHERE id = $1 AND lease_owner = $2`, [id, owner, ms]);
  },

  /**
   * Takes a cancelled job due for settling (`settle_after` passed, no live lease) for `owner`, and clears its
   * `settle_after`: one sweep per cancel. Null when none is due.
   */
  async claimSettling(q: Queryable, owner: string, leaseMs: number): Promise<JobRow | null> {
    const rows = await run<JobRow>(
      q,
      `UPDATE ${SCHEMA}.jobs j SET lease_owner = $1, lease_until = clock_timestamp() + $2 * interval '1 millisecond', settle_after = NULL
       WHERE j.id = (SELECT id FROM ${SCHEMA}.jobs WHERE settle_after <= clock_timestamp()
                       AND (lease_until IS NULL OR lease_until < clock_timestamp())
                     ORDER BY settle_after LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING j.*`,
      [owner, leaseMs],
    );
    return rows[0] ?? null;
  },

  /** Asks for the settling sweep again after `ms` (messaging did not answer). */
  async settleLater(q: Queryable, id: string, ms: number): Promise<void> {
    await run(q, `UPDATE ${SCHEMA}.jobs SET settle_after = clock_timestamp() + $2 * interval '1 millisecond' WHERE id = $1`, [id, ms]);
  },

  /** The jobs of a template follow its status (in the status change's transaction); answers the jobs that stopped sending. */
  async followTemplate(q: Queryable, templateId: string, status: TemplateStatus): Promise<string[]> {
    let rows: Array<{ id: string }> = [];
    if (status === "paused") {
      rows = await run(q, `UPDATE ${SCHEMA}.jobs SET status = 'paused', updated_at = now() WHERE template_id = $1 AND status = 'running' RETURNING id`, [templateId]);
    } else if (status === "approved") {
      await run(q, `UPDATE ${SCHEMA}.jobs SET status = 'running', run_after = NULL, updated_at = now() WHERE template_id = $1 AND status = 'paused'`, [templateId]);
    } else if (status === "rejected" || status === "disabled") {
      // A job a run holds ends when the run lets go (ADR 0023); the others end now.
      rows = await run(
        q,
        `UPDATE ${SCHEMA}.jobs SET failure_reason = $2, updated_at = now(),
           stop_as = CASE WHEN ${HELD} THEN 'failed' END,
           status = CASE WHEN ${HELD} THEN status ELSE 'failed' END,
           completed_at = CASE WHEN ${HELD} THEN completed_at ELSE now() END,
           settle_after = CASE WHEN NOT (${HELD}) AND ${HAS_SENDING} THEN clock_timestamp() ELSE settle_after END
         WHERE template_id = $1 AND status IN ('queued', 'running', 'paused') AND stop_as IS NULL RETURNING id`,
        [templateId, `template ${status}`],
      );
    }
    return rows.map((r) => r.id);
  },

  /**
   * Takes one due, unowned (or abandoned) job for `owner` until `leaseMs`
   * from now: `FOR UPDATE SKIP LOCKED`, so two replicas never take the same
   * one; a queued job becomes running.
   *
   * Fairly between organizations: a job's turn is the number of jobs its
   * organization has running now (live leases) plus its rank among the
   * organization's due jobs, so each organization's first due job comes before
   * any organization's second; ties go to the job due the longest (since its
   * creation, its schedule, or the `run_after` it was released with: a job that
   * yielded its place or waited for its throttle goes behind the others).
   */
  async claimJob(q: Queryable, owner: string, leaseMs: number): Promise<JobRow | null> {
    const rows = await run<JobRow>(
      q,
      `WITH busy AS (
         SELECT organization_id, count(*) AS n FROM ${SCHEMA}.jobs
         WHERE status IN ('queued', 'running') AND lease_until >= clock_timestamp() GROUP BY organization_id),
       due AS (
         SELECT c.id, greatest(c.created_at, c.scheduled_for, c.run_after) AS since, c.organization_id FROM ${SCHEMA}.jobs c WHERE ${unownedDue("c")}),
       turns AS (
         SELECT due.id, due.since,
           COALESCE(busy.n, 0) + row_number() OVER (PARTITION BY due.organization_id ORDER BY due.since, due.id) AS turn
         FROM due LEFT JOIN busy ON busy.organization_id = due.organization_id)
       UPDATE ${SCHEMA}.jobs j SET lease_owner = $1, lease_until = clock_timestamp() + $2 * interval '1 millisecond',
         status = 'running', started_at = COALESCE(j.started_at, clock_timestamp()), updated_at = now()
       WHERE j.id = (
         SELECT k.id FROM ${SCHEMA}.jobs k JOIN turns t ON t.id = k.id
         WHERE ${unownedDue("k")}
         ORDER BY t.turn, t.since, k.id
         FOR UPDATE OF k SKIP LOCKED
         LIMIT 1)
       RETURNING j.*`,
      [owner, leaseMs],
    );
    return rows[0] ?? null;
  },

  /** Organizations with a due job nobody runs (the runner's time slice looks whether one waits for its place). */
  async waitingOrganizations(q: Queryable, limit: number): Promise<string[]> {
    const rows = await run<{ organization_id: string }>(
      q,
      `SELECT DISTINCT j.organization_id FROM ${SCHEMA}.jobs j WHERE ${unownedDue("j")} LIMIT $1`,
      [limit],
    );
    return rows.map((r) => r.organization_id);
  },

  /**
   * Extends the lease; null when it is no longer ours, the job is no longer running (cancelled, paused, failed), or
   * its organization is `inactive` (ADR 0022: the run stops, and the job waits unclaimed until the plan changes).
   */
  async renew(q: Queryable, id: string, owner: string, leaseMs: number): Promise<JobRow | null> {
    const rows = await run<JobRow>(
      q,
      `UPDATE ${SCHEMA}.jobs j SET lease_until = clock_timestamp() + $3 * interval '1 millisecond'
       WHERE j.id = $1 AND j.lease_owner = $2 AND j.status = 'running' AND j.stop_as IS NULL AND ${organizationActive("j.organization_id")} RETURNING j.*`,
      [id, owner, leaseMs],
    );
    return rows[0] ?? null;
  },

  /** The organization's jobs that may be sending (running, or queued and due): their batches in flight are held back. */
  async activeIdsOf(q: Queryable, organizationId: string): Promise<string[]> {
    const rows = await run<{ id: string }>(q, `SELECT id FROM ${SCHEMA}.jobs WHERE organization_id = $1 AND status IN ('queued', 'running')`, [organizationId]);
    return rows.map((r) => r.id);
  },

  /** Lets go of the job (a stop asked meanwhile takes effect: APPLY_STOP). */
  async release(q: Queryable, id: string, owner: string, runAfterMs: number | null): Promise<void> {
    await run(
      q,
      `UPDATE ${SCHEMA}.jobs SET lease_owner = NULL, lease_until = NULL, ${APPLY_STOP},
         run_after = CASE WHEN $3::int IS NULL THEN run_after ELSE clock_timestamp() + $3::int * interval '1 millisecond' END
       WHERE id = $1 AND lease_owner = $2`,
      [id, owner, runAfterMs],
    );
  },

  /**
   * A throttled job whose next slot is not due lets go of its lease until `leadMs` before that slot (read on the job
   * row, in Postgres' clock): it stays `running`, and the runner's place goes to jobs with sends due meanwhile.
   */
  async releaseUntilNextSlot(q: Queryable, id: string, owner: string, leadMs: number): Promise<void> {
    await run(
      q,
      `UPDATE ${SCHEMA}.jobs SET lease_owner = NULL, lease_until = NULL, run_after = next_slot_at - $3::int * interval '1 millisecond', ${APPLY_STOP}
       WHERE id = $1 AND lease_owner = $2`,
      [id, owner, leadMs],
    );
  },

  async setStatus(q: Queryable, id: string, from: string[], to: JobRow["status"], reason: string | null = null): Promise<void> {
    await run(
      q,
      `UPDATE ${SCHEMA}.jobs SET status = $3, failure_reason = COALESCE($4, failure_reason), updated_at = now(),
         completed_at = CASE WHEN $3 IN ('completed', 'cancelled', 'failed') THEN now() ELSE completed_at END
       WHERE id = $1 AND status = ANY($2::text[])`,
      [id, from, to, reason],
    );
  },

  async pendingPhones(q: Queryable, jobId: string, afterSeq: number, limit: number): Promise<Array<{ seq: number; phone: string }>> {
    return run(q, `SELECT seq, phone FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state = 'pending' AND seq > $2 ORDER BY seq LIMIT $3`, [jobId, afterSeq, limit]);
  },

  /** Opted-out recipients (the batch check ahead of sending) become `skipped`, counted once. */
  async markSkipped(q: Queryable, jobId: string, seqs: number[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const rows = await run(
      q,
      `UPDATE ${SCHEMA}.job_recipients SET state = 'skipped', updated_at = now()
       WHERE job_id = $1 AND seq = ANY($2::int[]) AND state = 'pending' RETURNING seq`,
      [jobId, seqs],
    );
    if (rows.length) await run(q, `UPDATE ${SCHEMA}.jobs SET skipped = skipped + $2 WHERE id = $1`, [jobId, rows.length]);
    return rows.length;
  },

  async markOptOutsChecked(q: Queryable, jobId: string): Promise<void> {
    await run(q, `UPDATE ${SCHEMA}.jobs SET opt_outs_checked = true WHERE id = $1`, [jobId]);
  },

  /**
   * Claims the next `pending` recipients (→ `sending`) in one statement; concurrent claims skip each other's rows.
   * With `seqs`, only among recipients `from <= seq < to`: the runner walks the job in seq windows, so a claim reads
   * one window of the index, never the rows of the job already sent (a job's statistics are never fresh while it
   * runs, and the planner read and sorted every open row of the job for each claim: 15 ms per claim at 50,000).
   */
  async claimRecipients(q: Queryable, jobId: string, limit: number, seqs?: { from: number; to: number }): Promise<RecipientRow[]> {
    return run<RecipientRow>(
      q,
      // MATERIALIZED: the locking subquery runs once (a rescan in a nested loop would lock, and claim, more rows).
      `WITH c AS MATERIALIZED (
         SELECT seq FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state = 'pending' AND seq >= $3 AND seq < $4
         ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED)
       UPDATE ${SCHEMA}.job_recipients r SET state = 'sending', attempts = r.attempts + 1, updated_at = now()
       FROM c WHERE r.job_id = $1 AND r.seq = c.seq
       RETURNING r.*`,
      [jobId, limit, seqs?.from ?? 0, seqs?.to ?? 2 ** 31 - 1],
    );
  },

  /** Recipients an earlier run left `sending` (its outcome unknown): sent again with the same keys. */
  async sendingSeqs(q: Queryable, jobId: string): Promise<number[]> {
    const rows = await run<{ seq: number }>(q, `SELECT seq FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state = 'sending' ORDER BY seq`, [jobId]);
    return rows.map((r) => r.seq);
  },

  /**
   * Rows this run claimed and never sent (their throttle slot was not due): back to `pending`. The only claim undone
   * without an answer, and safe because no send of their key was asked for; a crash before it leaves them `sending`,
   * sent again with the same keys as any other.
   */
  async unclaim(q: Queryable, jobId: string, seqs: number[]): Promise<void> {
    await run(
      q,
      `UPDATE ${SCHEMA}.job_recipients SET state = 'pending', attempts = greatest(attempts - 1, 0), updated_at = now()
       WHERE job_id = $1 AND seq = ANY($2::int[]) AND state = 'sending'`,
      [jobId, seqs],
    );
  },

  /** The lowest `pending` seq (where a run's claim windows start), null when none is left. */
  async firstPendingSeq(q: Queryable, jobId: string): Promise<number | null> {
    const rows = await run<{ seq: number }>(
      q,
      `SELECT seq FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state = 'pending' ORDER BY seq LIMIT 1`,
      [jobId],
    );
    return rows[0]?.seq ?? null;
  },

  async recipientsBySeq(q: Queryable, jobId: string, seqs: number[]): Promise<RecipientRow[]> {
    return run<RecipientRow>(q, `SELECT * FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND seq = ANY($2::int[]) ORDER BY seq`, [jobId, seqs]);
  },

  /**
   * The throttle's slot of one recipient, reserved atomically on the job row
   * (`next_slot_at` moves by one interval per reservation, from no earlier
   * than now), and stored on the recipient. A recipient sent again after a
   * crash or a pause takes a new slot: an old one would be in the past.
   * Only a slot due within `horizonMs` is reserved (null otherwise): a job
   * does not hold the runner's place to wait for a later one.
   */
  async reserveSlot(q: Queryable, jobId: string, seq: number, intervalMs: number, horizonMs: number): Promise<Date | null> {
    const rows = await run<{ slot_at: Date }>(
      q,
      `WITH s AS (
         UPDATE ${SCHEMA}.jobs SET next_slot_at = greatest(COALESCE(next_slot_at, clock_timestamp()), clock_timestamp()) + $3 * interval '1 millisecond'
         WHERE id = $1 AND (next_slot_at IS NULL OR next_slot_at <= clock_timestamp() + $4 * interval '1 millisecond')
         RETURNING next_slot_at - $3 * interval '1 millisecond' AS slot)
       UPDATE ${SCHEMA}.job_recipients r SET slot_at = s.slot FROM s WHERE r.job_id = $1 AND r.seq = $2 RETURNING r.slot_at`,
      [jobId, seq, intervalMs, horizonMs],
    );
    return rows[0]?.slot_at ?? null;
  },

  /**
   * Records messaging's outcomes of a batch: only rows still `sending` move
   * (a repeated answer changes nothing), and the job's counters move with them.
   * The batch's seq range bounds the index scan: joined on `seq` alone, the
   * planner (a running job's statistics are never fresh) read every open row
   * of the job.
   */
  async recordOutcomes(
    q: Queryable,
    jobId: string,
    outcomes: Array<{ seq: number; state: FinalState | "waiting"; messageId: string | null; errorCode: string | null }>,
  ): Promise<void> {
    if (outcomes.length === 0) return;
    const rows = await run<{ state: string }>(
      q,
      `UPDATE ${SCHEMA}.job_recipients r SET state = o.state, message_id = o.message_id, error_code = o.error_code, updated_at = now()
       FROM unnest($2::int[], $3::text[], $4::text[], $5::text[]) AS o(seq, state, message_id, error_code)
       WHERE r.job_id = $1 AND r.seq BETWEEN $6 AND $7 AND r.seq = o.seq AND r.state = 'sending'
       RETURNING r.state`,
      [
        jobId, outcomes.map((o) => o.seq), outcomes.map((o) => o.state), outcomes.map((o) => o.messageId), outcomes.map((o) => o.errorCode),
        outcomes.reduce((m, o) => Math.min(m, o.seq), Infinity), outcomes.reduce((m, o) => Math.max(m, o.seq), -Infinity),
      ],
    );
    await this.count(q, jobId, rows.map((r) => r.state));
  },

  async count(q: Queryable, jobId: string, states: string[]): Promise<void> {
    const n = (s: string) => states.filter((x) => x === s).length;
    if (n("sent") + n("failed") + n("skipped") === 0) return;
    await run(q, `UPDATE ${SCHEMA}.jobs SET sent = sent + $2, failed = failed + $3, skipped = skipped + $4, updated_at = now() WHERE id = $1`, [
      jobId, n("sent"), n("failed"), n("skipped"),
    ]);
  },

  /**
   * Final outcomes of several sends messaging was retrying, by message id, in one statement (then one count): rows
   * are locked in one go, so a `message.*` event finalizing one of them at the same time waits, never deadlocks.
   */
  async finalizeMessages(q: Queryable, jobId: string, outcomes: Array<{ messageId: string; state: FinalState; errorCode: string | null }>): Promise<void> {
    if (outcomes.length === 0) return;
    const rows = await run<{ state: string }>(
      q,
      `UPDATE ${SCHEMA}.job_recipients r SET state = o.state, error_code = o.error_code, updated_at = now()
       FROM unnest($2::text[], $3::text[], $4::text[]) AS o(message_id, state, error_code)
       WHERE r.job_id = $1 AND r.message_id = o.message_id AND r.state = 'waiting'
       RETURNING r.state`,
      [jobId, outcomes.map((o) => o.messageId), outcomes.map((o) => o.state), outcomes.map((o) => o.errorCode)],
    );
    await this.count(q, jobId, rows.map((r) => r.state));
  },

  /**
   * The final outcome of a send messaging was retrying (`message.sent` / `message.failed`), or of one the job's cancel
   * had stopped whose unanswered call the provider had accepted after all (`cancelled`, counted now).
   */
  async finalizeMessage(q: Queryable, jobId: string, messageId: string, state: "sent" | "failed" | "skipped", errorCode: string | null): Promise<"updated" | "known" | "unknown"> {
    const rows = await run<{ state: string }>(
      q,
      `UPDATE ${SCHEMA}.job_recipients SET state = $3, error_code = $4, updated_at = now()
       WHERE job_id = $1 AND message_id = $2 AND state IN ('waiting', 'cancelled') RETURNING state`,
      [jobId, messageId, state, errorCode],
    );
    if (rows.length) {
      await this.count(q, jobId, [state]);
      return "updated";
    }
    const known = await run(q, `SELECT 1 FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND message_id = $2`, [jobId, messageId]);
    return known.length ? "known" : "unknown";
  },

  /** The job's recipients `waiting` since longer than `olderThanMs` (their send's event is overdue), in seq order. */
  async waitingSince(q: Queryable, jobId: string, olderThanMs: number, limit: number): Promise<Array<{ seq: number; message_id: string }>> {
    return run(
      q,
      `SELECT seq, message_id FROM ${SCHEMA}.job_recipients
       WHERE job_id = $1 AND state = 'waiting' AND message_id IS NOT NULL AND updated_at < now() - $2 * interval '1 millisecond'
       ORDER BY seq LIMIT $3`,
      [jobId, olderThanMs, limit],
    );
  },

  /** The message ids of the job's `waiting` recipients (messaging retries their sends). */
  async waitingMessageIds(q: Queryable, jobId: string): Promise<string[]> {
    const rows = await run<{ message_id: string }>(
      q,
      `SELECT message_id FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state = 'waiting' AND message_id IS NOT NULL ORDER BY seq`,
      [jobId],
    );
    return rows.map((r) => r.message_id);
  },

  async openCounts(q: Queryable, jobId: string): Promise<{ unsent: number; waiting: number }> {
    const rows = await run<{ unsent: string; waiting: string }>(
      q,
      `SELECT count(*) FILTER (WHERE state IN ('pending', 'sending')) AS unsent, count(*) FILTER (WHERE state = 'waiting') AS waiting
       FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state IN ('pending', 'sending', 'waiting')`,
      [jobId],
    );
    return { unsent: Number(rows[0]?.unsent ?? 0), waiting: Number(rows[0]?.waiting ?? 0) };
  },

  /** `running` → `completed` once no recipient is open (a job asked to stop ends as asked, when its run lets go). */
  async completeIfDone(q: Queryable, jobId: string): Promise<boolean> {
    const rows = await run(
      q,
      `UPDATE ${SCHEMA}.jobs SET status = 'completed', completed_at = now(), updated_at = now(), lease_owner = NULL, lease_until = NULL
       WHERE id = $1 AND status = 'running' AND stop_as IS NULL
         AND NOT EXISTS (SELECT 1 FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND state IN ('pending', 'sending', 'waiting'))
       RETURNING id`,
      [jobId],
    );
    return rows.length > 0;
  },
};
