import { CONTACTS_RPC, MESSAGING_RPC, RPC, type TemplateSendOutcome } from "@platform/contracts";
import { RpcCallError } from "@platform/bus";
import type { TemplateJobsContext } from "../context";
import { jobsRepository, type FinalState, type JobRow, type RecipientRow } from "../db/repositories/jobs.repository";
import { finalStateOf } from "./final-state";
import { announceStopped, stopWaitingSends } from "./jobs";
import { templateById, type TemplateRow } from "../db/repositories/templates.repository";

/** Numbers per opt-out check request: the request stays well under NATS' 1 MB payload (about 55,000 numbers). */
export const OPT_OUT_CHECK_CHUNK = 50_000;
/** Numbers per `rpc.contacts.resolve-many.v1` request (its limit). */
const RESOLVE_CHUNK = 10_000;
/** While only `waiting` recipients remain (messaging retries them), look again after this long. */
const WAITING_RECHECK_MS = 5_000;
/**
 * A throttled job waits in the runner for a slot due within this long; a later slot releases the job (still
 * `running`) until THROTTLE_LEAD_MS before it, so a job at `throttlePerHour: 1` does not hold one of the runner's
 * JOB_CONCURRENCY places for an hour between sends. The lead (more than JOB_POLL_MS, less than the hold) lets the
 * next run be claimed and ready before its slot.
 */
const THROTTLE_HOLD_MS = 2_000;
/** A lane waiting for its throttle slot looks this often whether the job was cancelled here or the process stops. */
const SLOT_WAIT_STEP_MS = 50;
const THROTTLE_LEAD_MS = 1_000;

export const sendKey = (jobId: string, seq: number) => `job:${jobId}:${seq}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface RunOptions {
  owner: string;
  leaseMs: number;
  isStopping(): boolean;
  /** True when the runner wants this job's place for another organization's job (time slice): the run ends, the job stays due. */
  shouldYield?(): boolean;
}

/**
 * Runs one job this replica holds the lease of, until it is done, paused,
 * cancelled, failed, or the lease is lost. Rows a crashed run left `sending`
 * go first, with the same keys; then each round renews the lease (and sees
 * the job's status), claims a batch (`pending` → `sending`, one statement),
 * asks messaging to send it (again and again with the same keys until it
 * answers), and records the outcomes in one transaction.
 * docs/adr/0006-template-jobs-exactly-once.md.
 */
export async function runJob(ctx: TemplateJobsContext, claimed: JobRow, opts: RunOptions): Promise<void> {
  const jobId = claimed.id;
  let current: Run | undefined;
  ctx.runs.begin(jobId);
  try {
    const template = await templateById(ctx.db, claimed.template_id);
    if (!template) {
      await jobsRepository.setStatus(ctx.db, jobId, ["running"], "failed", "template missing");
      return;
    }
    if (!claimed.opt_outs_checked) await skipOptedOut(ctx, claimed);
    const throttled = claimed.throttle_per_hour !== null;
    const batchSize = throttled ? 1 : await batchSizeOf(ctx, claimed);
    // Claim windows start at the first pending recipient: a job taken again (after a restart, a throttle wait or a
    // time slice) does not walk the windows already sent.
    const nextSeq = (await jobsRepository.firstPendingSeq(ctx.db, jobId)) ?? claimed.recipients;
    const run: Run = { ctx, opts, template, batchSize, stopped: false, parked: false, yielded: false, nextSeq, recipients: claimed.recipients };
    current = run;

    // Recovery first: recipients a previous run left `sending` go again, with the same keys, before anything new.
    const leftover = await jobsRepository.sendingSeqs(ctx.db, jobId);
    for (let i = 0; i < leftover.length && !run.stopped && !run.parked; i += batchSize) {
      const rows = await jobsRepository.recipientsBySeq(ctx.db, jobId, leftover.slice(i, i + batchSize));
      await round(run, jobId, rows);
    }
    // Then pending recipients, with up to SEND_PIPELINE batches in flight (the next batches are claimed and stored while
    // earlier ones are paced and sent). Throttled jobs send one recipient per
    // slot; several lanes wait for consecutive slots, so one send's round trips never delay the next slot.
    const lanes = throttled ? THROTTLE_LANES : ctx.env.SEND_PIPELINE;
    await Promise.all(
      Array.from({ length: run.parked ? 0 : lanes }, async () => {
        while (!run.stopped) {
          if (!(await round(run, jobId, null))) break;
        }
      }),
    );
    const stopAs = (await jobsRepository.byId(ctx.db, claimed.organization_id, jobId))?.stop_as ?? null;
    if (stopAs !== null) {
      // Asked to stop while this run held it (ADR 0023): the sends messaging retries end too; the stop takes effect as
      // the run lets go (release, below), with every batch of this run recorded.
      await stopWaitingSends(ctx, claimed.organization_id, jobId, stopAs);
    } else if (run.parked && !run.stopped) {
      // The next throttle slot is not due soon: the job lets go of its place until shortly before it.
      await jobsRepository.releaseUntilNextSlot(ctx.db, jobId, opts.owner, THROTTLE_LEAD_MS);
    } else if (!run.stopped && !(await jobsRepository.completeIfDone(ctx.db, jobId))) {
      // Only `waiting` recipients are left (messaging retries them; their events finish the job), or a lane stopped early.
      // Those waiting for long are looked up: an event that never came must not hold the job open for ever.
      if (!(await settleOverdueWaiting(ctx, claimed))) await jobsRepository.release(ctx.db, jobId, opts.owner, WAITING_RECHECK_MS);
    }
  } finally {
    // A job that yielded its place is due again at once, behind the jobs that waited (the claim's order).
    await jobsRepository.release(ctx.db, jobId, opts.owner, current?.yielded ? 0 : null).catch(() => undefined);
    ctx.runs.end(jobId);
  }
}

const THROTTLE_LANES = 4;

interface Run {
  ctx: TemplateJobsContext;
  opts: RunOptions;
  template: TemplateRow;
  batchSize: number;
  stopped: boolean;
  /** A lane found its next throttle slot not due within THROTTLE_HOLD_MS: the run ends and the job waits released. */
  parked: boolean;
  /** The runner took this job's place for another organization's job (time slice). */
  yielded: boolean;
  /** The lanes claim in consecutive seq windows of `batchSize` from here; past the last recipient, from anywhere. */
  nextSeq: number;
  recipients: number;
}

/** The next batch of `pending` recipients: the next seq window (taken before any await, so lanes never share one), then a last look at the whole job. */
async function claim(run: Run, jobId: string): Promise<RecipientRow[]> {
  while (run.nextSeq < run.recipients) {
    const from = run.nextSeq;
    run.nextSeq += run.batchSize;
    const rows = await jobsRepository.claimRecipients(run.ctx.db, jobId, run.batchSize, { from, to: from + run.batchSize });
    if (rows.length > 0) return rows;
  }
  return jobsRepository.claimRecipients(run.ctx.db, jobId, run.batchSize);
}

/**
 * One round: renew the lease (and see the job's and the template's status),
 * claim a batch (or take the given rows), send it until messaging answers,
 * record the outcomes. False when there was nothing left to claim or the
 * job must stop.
 */
async function round(run: Run, jobId: string, given: RecipientRow[] | null): Promise<boolean> {
  const { ctx, opts } = run;
  const job = await jobsRepository.renew(ctx.db, jobId, opts.owner, opts.leaseMs);
  if (!job || opts.isStopping()) {
    run.stopped = true;
    return false;
  }
  if (opts.shouldYield?.()) {
    run.stopped = run.yielded = true;
    return false;
  }
  const status = (await templateById(ctx.db, job.template_id))?.status ?? "disabled";
  if (status !== "approved") {
    // `failed` takes effect when this run lets go, its batches in flight recorded (ADR 0023); a pause at once.
    if (status === "rejected" || status === "disabled") {
      await jobsRepository.requestStop(ctx.db, job.organization_id, jobId, "failed", opts.owner, opts.leaseMs, `template ${status}`);
    } else await jobsRepository.setStatus(ctx.db, jobId, ["running"], "paused");
    announceStopped(ctx, [jobId]);
    run.stopped = true;
    return false;
  }
  const rows = (given ?? (await claim(run, jobId))).sort((a, b) => a.seq - b.seq);
  if (rows.length === 0) return false;
  if (job.throttle_per_hour !== null) {
    const slot = await waitForSlot(ctx, job, rows[0], opts);
    if (slot !== "due") {
      // Never sent: claimed rows go back to `pending`; rows a previous run left `sending` stay so (sent again first).
      if (!given) await jobsRepository.unclaim(ctx.db, jobId, rows.map((r) => r.seq));
      if (slot === "later") run.parked = true;
      else run.stopped = true;
      return false;
    }
  }
  ctx.batches.begin(jobId);
  try {
    return await sendUntilAnswered(run, job, rows);
  } finally {
    ctx.batches.end(jobId);
  }
}

/** Sends the batch until messaging answers and records the outcomes; false when the job must stop first. */
async function sendUntilAnswered(run: Run, job: JobRow, rows: RecipientRow[]): Promise<boolean> {
  const { ctx, opts } = run;
  const jobId = job.id;
  for (let failures = 0; ; failures++) {
    try {
      const results = await sendBatch(ctx, job, run.template, rows);
      await record(ctx, jobId, rows, results);
      return true;
    } catch (err) {
      if (err instanceof RpcCallError && !err.retryable) {
        // Messaging refused the batch itself (not one send): sending it again cannot succeed.
        ctx.log.error({ jobId, code: err.code, err: err.message }, "template send batch refused");
        await jobsRepository.recordOutcomes(ctx.db, jobId, rows.map((r) => ({ seq: r.seq, state: "failed" as const, messageId: null, errorCode: err.code })));
        ctx.onRecipients?.("failed", rows.length);
        return true;
      }
      // Unknown outcome (timeout, messaging or Postgres down): the rows stay `sending` and go again with the same keys.
      ctx.log.warn({ jobId, failures, err: (err as Error).message }, "template send batch failed, will retry");
      await sleep(Math.min(10_000, 200 * 2 ** Math.min(failures, 6)));
      if (opts.isStopping() || !(await jobsRepository.renew(ctx.db, jobId, opts.owner, opts.leaseMs).catch(() => null))) {
        run.stopped = true;
        return false;
      }
    }
  }
}

/** The batch check of opt-outs ahead of sending (messaging checks each send again, read-your-writes). */
async function skipOptedOut(ctx: TemplateJobsContext, job: JobRow): Promise<void> {
  const timeoutMs = Math.max(ctx.env.RPC_TIMEOUT_MS, 30_000);
  let after = -1;
  for (;;) {
    const chunk = await jobsRepository.pendingPhones(ctx.db, job.id, after, OPT_OUT_CHECK_CHUNK);
    if (chunk.length === 0) break;
    after = chunk[chunk.length - 1].seq;
    const phones = [...new Set(chunk.map((r) => r.phone))];
    const { optedOut } = await ctx.bus.request(
      RPC.checkOptOuts,
      { organizationId: job.organization_id, messagingChannelId: job.messaging_channel_id, phones },
      { timeoutMs },
    );
    if (optedOut.length) {
      // A skipped recipient is a contact of the organization like every recipient of the job (contract: contacts are
      // created by template jobs), made before the skip is recorded, so a failure here is retried with the chunk.
      for (let i = 0; i < optedOut.length; i += RESOLVE_CHUNK) {
        await ctx.bus.request(
          CONTACTS_RPC.resolveContacts,
          { organizationId: job.organization_id, phones: optedOut.slice(i, i + RESOLVE_CHUNK) },
          { timeoutMs },
        );
      }
      const out = new Set(optedOut);
      await ctx.db.transaction((m) => jobsRepository.markSkipped(m, job.id, chunk.filter((r) => out.has(r.phone)).map((r) => r.seq)));
    }
  }
  await jobsRepository.markOptOutsChecked(ctx.db, job.id);
}

/** About 200 ms of the channel's rate per batch (what messaging's bulk pacing expects), at most SEND_BATCH_MAX. */
async function batchSizeOf(ctx: TemplateJobsContext, job: JobRow): Promise<number> {
  try {
    const { channel } = await ctx.bus.request(
      RPC.lookupChannel,
      { organizationId: job.organization_id, channelId: job.messaging_channel_id },
      { timeoutMs: ctx.env.RPC_TIMEOUT_MS },
    );
    return Math.max(1, Math.min(ctx.env.SEND_BATCH_MAX, Math.ceil((channel?.messagesPerSecond ?? 50) / 5)));
  } catch {
    return Math.min(ctx.env.SEND_BATCH_MAX, 10);
  }
}

/**
 * Reserves (and stores) the throttle slot of the next send when it is due within THROTTLE_HOLD_MS, then waits for it,
 * keeping the lease: `due` once it is time and the job still runs, `later` when the next slot is further away (nothing
 * reserved), `stopped` when the job stopped meanwhile.
 */
async function waitForSlot(ctx: TemplateJobsContext, job: JobRow, row: RecipientRow, opts: RunOptions): Promise<"due" | "later" | "stopped"> {
  const slotAt = await jobsRepository.reserveSlot(ctx.db, job.id, row.seq, 3_600_000 / job.throttle_per_hour!, THROTTLE_HOLD_MS);
  if (!slotAt) return "later";
  for (let renewedAt = Date.now(); ; ) {
    const wait = slotAt.getTime() - Date.now();
    // The job may have stopped while the slot came (paused, failed or cancelled, on any replica): one look, with the
    // lease renewed, right before the send.
    if (wait <= 0) return (await jobsRepository.renew(ctx.db, job.id, opts.owner, opts.leaseMs)) ? "due" : "stopped";
    // A cancel through this process is seen within a step; one elsewhere at the next renewal (the lease's third).
    await sleep(Math.min(wait, SLOT_WAIT_STEP_MS));
    if (opts.isStopping() || ctx.cancelledJobs.has(job.id)) return "stopped";
    if (Date.now() - renewedAt >= opts.leaseMs / 3) {
      if (!(await jobsRepository.renew(ctx.db, job.id, opts.owner, opts.leaseMs))) return "stopped";
      renewedAt = Date.now();
    }
  }
}

async function sendBatch(ctx: TemplateJobsContext, job: JobRow, template: TemplateRow, rows: RecipientRow[]): Promise<Map<string, TemplateSendOutcome>> {
  const answer = await ctx.bus.request(
    MESSAGING_RPC.sendTemplates,
    {
      organizationId: job.organization_id,
      messagingChannelId: job.messaging_channel_id,
      templateJobId: job.id,
      template: { name: template.name, language: template.language, headerFormat: template.header_format },
      headerMedia: job.header_media,
      sends: rows.map((r) => ({
        key: sendKey(job.id, r.seq),
        phone: r.phone,
        bodyParameters: r.body_parameters,
        buttonParameters: r.button_parameters,
      })),
      issuedAt: Date.now(),
      // Slots are spaced on the job's timeline here; messaging keeps its provider calls that far apart too.
      ...(job.throttle_per_hour !== null ? { minIntervalMs: 3_600_000 / job.throttle_per_hour } : {}),
    },
    { timeoutMs: ctx.env.SEND_BATCH_TIMEOUT_MS },
  );
  return new Map(answer.results.map((r) => [r.key, r]));
}


/** Recipients asked about per lookup (the request's limit). */
const SETTLE_CHUNK = 1_000;

/**
 * Settles a cancelled job's recipients a dead run left `sending` (ADR 0018): messaging answers the outcome of each key
 * it stored, and those are recorded as a batch answer would have been; keys it never stored were never sent and stay
 * `sending`, uncounted. The caller holds the job's lease.
 */
export async function settleCancelled(ctx: TemplateJobsContext, job: JobRow): Promise<number> {
  const seqs = await jobsRepository.sendingSeqs(ctx.db, job.id);
  let settled = 0;
  for (let i = 0; i < seqs.length; i += SETTLE_CHUNK) {
    const rows = await jobsRepository.recipientsBySeq(ctx.db, job.id, seqs.slice(i, i + SETTLE_CHUNK));
    const { results } = await ctx.bus.request(
      MESSAGING_RPC.lookupTemplateSends,
      { organizationId: job.organization_id, keys: rows.map((r) => sendKey(job.id, r.seq)) },
      { timeoutMs: ctx.env.RPC_TIMEOUT_MS },
    );
    await record(ctx, job.id, rows, new Map(results.map((r) => [r.key, r])));
    settled += results.length;
  }
  return settled;
}

/**
 * A recipient `waiting` this long has had no `message.sent` / `message.failed` recorded: messaging may still be
 * retrying its send (the provider down for a while), or the event went astray. Either way one lookup says.
 */
export const WAITING_LOOKUP_AFTER_MS = 30_000;

/**
 * The job's recipients `waiting` for longer than WAITING_LOOKUP_AFTER_MS, settled from messaging's stored outcome
 * (`rpc.messaging.template.lookup.v1`, which sends nothing) as their events would have: the job's counts do not
 * depend on every event arriving. Sends still pending there stay `waiting`. True when the job completed.
 */
export async function settleOverdueWaiting(ctx: TemplateJobsContext, job: JobRow): Promise<boolean> {
  try {
    const rows = await jobsRepository.waitingSince(ctx.db, job.id, WAITING_LOOKUP_AFTER_MS, SETTLE_CHUNK);
    if (rows.length === 0) return false;
    const { results } = await ctx.bus.request(
      MESSAGING_RPC.lookupTemplateSends,
      { organizationId: job.organization_id, keys: rows.map((r) => sendKey(job.id, r.seq)) },
      { timeoutMs: ctx.env.RPC_TIMEOUT_MS },
    );
    const outcomes = results.flatMap((r) => {
      if (r.outcome === "pending" || !r.messageId) return [];
      const errorCode = r.error?.code ?? null;
      return [{ messageId: r.messageId, state: finalStateOf(r.outcome, errorCode), errorCode }];
    });
    if (outcomes.length === 0) return false;
    ctx.log.warn({ jobId: job.id, settled: outcomes.length }, "template sends waiting without their event settled from messaging's outcome");
    return await ctx.db.transaction(async (m) => {
      await jobsRepository.finalizeMessages(m, job.id, outcomes);
      return jobsRepository.completeIfDone(m, job.id);
    });
  } catch (err) {
    ctx.log.warn({ jobId: job.id, err: (err as Error).message }, "looking up overdue waiting sends failed; will look again");
    return false;
  }
}

/** The outcomes in one transaction; a send missing from the answer stays `sending` (sent again with its key). */
async function record(ctx: TemplateJobsContext, jobId: string, rows: RecipientRow[], results: Map<string, TemplateSendOutcome>): Promise<void> {
  const outcomes: Array<{ seq: number; state: FinalState | "waiting"; messageId: string | null; errorCode: string | null }> = [];
  for (const r of rows) {
    const result = results.get(sendKey(jobId, r.seq));
    if (!result) continue;
    const errorCode = result.error?.code ?? null;
    const state = result.outcome === "pending" ? "waiting" : finalStateOf(result.outcome, errorCode);
    outcomes.push({ seq: r.seq, state, messageId: result.messageId, errorCode });
  }
  await ctx.db.transaction(async (m) => {
    await jobsRepository.recordOutcomes(m, jobId, outcomes);
    await jobsRepository.completeIfDone(m, jobId);
  });
  for (const o of outcomes) {
    // A `cancelled` one is not final for the events: the provider may yet say it had accepted it.
    if (o.messageId && o.state !== "cancelled") (o.state === "waiting" ? ctx.waitingMessages : ctx.finalMessages).add(o.messageId);
  }
  if (ctx.onRecipients) for (const o of outcomes) ctx.onRecipients(o.state, 1);
}
