import { MESSAGING_RPC, RPC, type TemplateSendOutcome } from "@platform/contracts";
import { RpcCallError } from "@platform/bus";
import type { TemplateJobsContext } from "../context";
import { jobsRepository, type JobRow, type RecipientRow } from "../db/repositories/jobs.repository";
import { templateById, type TemplateRow } from "../db/repositories/templates.repository";

/** Numbers per opt-out check request: the request stays well under NATS' 1 MB payload (about 55,000 numbers). */
export const OPT_OUT_CHECK_CHUNK = 50_000;
/** While only `waiting` recipients remain (messaging retries them), look again after this long. */
const WAITING_RECHECK_MS = 5_000;

export const sendKey = (jobId: string, seq: number) => `job:${jobId}:${seq}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The throttle's decision for the next send: never before `nextSlotAt` (the
 * previous send's slot plus 3600/throttle seconds), never in the past. Slots
 * are persisted, so a restart does not reset the spacing.
 */
export function throttleSlot(nextSlotAt: Date | null, now: Date, throttlePerHour: number): { slotAt: Date; nextSlotAt: Date } {
  const slotAt = nextSlotAt && nextSlotAt.getTime() > now.getTime() ? nextSlotAt : now;
  return { slotAt, nextSlotAt: new Date(slotAt.getTime() + 3_600_000 / throttlePerHour) };
}

export interface RunOptions {
  owner: string;
  leaseMs: number;
  isStopping(): boolean;
}

/**
 * Runs one job this replica holds the lease of, until it is done, paused,
 * cancelled, failed, or the lease is lost. Each round: renew the lease (and
 * see the job's status), claim a batch of recipients (`pending` → `sending`
 * in one statement; rows left `sending` by a crash come first, with the same
 * keys), ask messaging to send them, record the outcomes in one transaction.
 * docs/adr/0006-template-jobs-exactly-once.md.
 */
export async function runJob(ctx: TemplateJobsContext, claimed: JobRow, opts: RunOptions): Promise<void> {
  let job: JobRow | null = claimed;
  let failures = 0;
  try {
    const template = await templateById(ctx.db, job.template_id);
    if (!template) {
      await jobsRepository.setStatus(ctx.db, job.id, ["running"], "failed", "template missing");
      return;
    }
    if (!job.opt_outs_checked) await skipOptedOut(ctx, job);
    const batchSize = job.throttle_per_hour ? 1 : await batchSizeOf(ctx, job);
    while (!opts.isStopping()) {
      job = await jobsRepository.renew(ctx.db, job.id, opts.owner, opts.leaseMs);
      if (!job) return;
      const status = (await templateById(ctx.db, job.template_id))?.status ?? "disabled";
      if (status !== "approved") {
        if (status === "rejected" || status === "disabled") await jobsRepository.setStatus(ctx.db, job.id, ["running"], "failed", `template ${status}`);
        else await jobsRepository.setStatus(ctx.db, job.id, ["running"], "paused");
        return;
      }
      const rows = await jobsRepository.claimRecipients(ctx.db, job.id, batchSize);
      if (rows.length === 0) {
        if (!(await jobsRepository.completeIfDone(ctx.db, job.id))) {
          await jobsRepository.release(ctx.db, job.id, opts.owner, WAITING_RECHECK_MS);
        }
        return;
      }
      if (job.throttle_per_hour) {
        if (!(await waitForSlot(ctx, job, rows[0], opts))) return;
      }
      try {
        const results = await sendBatch(ctx, job, template, rows);
        await record(ctx, job.id, rows, results);
        failures = 0;
      } catch (err) {
        if (err instanceof RpcCallError && !err.retryable) {
          // Messaging refused the batch itself (not one send): sending it again cannot succeed.
          ctx.log.error({ jobId: job.id, code: err.code, err: err.message }, "template send batch refused");
          await jobsRepository.recordOutcomes(
            ctx.db,
            job.id,
            rows.map((r) => ({ seq: r.seq, state: "failed" as const, messageId: null, errorCode: err.code })),
          );
          continue;
        }
        // Unknown outcome (timeout, messaging or Postgres down): the rows stay `sending` and go again with the same keys.
        failures++;
        ctx.log.warn({ jobId: job.id, failures, err: (err as Error).message }, "template send batch failed, will retry");
        await sleep(Math.min(30_000, 250 * 2 ** Math.min(failures, 7)));
      }
    }
  } finally {
    if (job) await jobsRepository.release(ctx.db, job.id, opts.owner, null).catch(() => undefined);
  }
}

/** The batch check of opt-outs ahead of sending (messaging checks each send again, read-your-writes). */
async function skipOptedOut(ctx: TemplateJobsContext, job: JobRow): Promise<void> {
  let after = -1;
  for (;;) {
    const chunk = await jobsRepository.pendingPhones(ctx.db, job.id, after, OPT_OUT_CHECK_CHUNK);
    if (chunk.length === 0) break;
    after = chunk[chunk.length - 1].seq;
    const phones = [...new Set(chunk.map((r) => r.phone))];
    const { optedOut } = await ctx.bus.request(
      RPC.checkOptOuts,
      { organizationId: job.organization_id, messagingChannelId: job.messaging_channel_id, phones },
      { timeoutMs: Math.max(ctx.env.RPC_TIMEOUT_MS, 30_000) },
    );
    if (optedOut.length) {
      const out = new Set(optedOut);
      await ctx.db.transaction((m) => jobsRepository.skip(m, job.id, chunk.filter((r) => out.has(r.phone)).map((r) => r.seq)));
    }
  }
  await jobsRepository.markOptOutsChecked(ctx.db, job.id);
}

/** About one second of the channel's rate per batch (messaging paces it), at most SEND_BATCH_MAX. */
async function batchSizeOf(ctx: TemplateJobsContext, job: JobRow): Promise<number> {
  try {
    const { channel } = await ctx.bus.request(
      RPC.lookupChannel,
      { organizationId: job.organization_id, channelId: job.messaging_channel_id },
      { timeoutMs: ctx.env.RPC_TIMEOUT_MS },
    );
    return Math.max(1, Math.min(ctx.env.SEND_BATCH_MAX, channel?.messagesPerSecond ?? 50));
  } catch {
    return Math.min(ctx.env.SEND_BATCH_MAX, 50);
  }
}

/** Decides (and persists) the throttle slot of the next send, then waits for it, keeping the lease. False when the job stopped. */
async function waitForSlot(ctx: TemplateJobsContext, job: JobRow, row: RecipientRow, opts: RunOptions): Promise<boolean> {
  let slotAt = row.slot_at;
  if (!slotAt) {
    const decided = throttleSlot(job.next_slot_at, new Date(), job.throttle_per_hour!);
    slotAt = decided.slotAt;
    await jobsRepository.setSlot(ctx.db, job.id, row.seq, decided.slotAt, decided.nextSlotAt);
  }
  for (;;) {
    const wait = slotAt.getTime() - Date.now();
    if (wait <= 0) return true;
    await sleep(Math.min(wait, opts.leaseMs / 3));
    if (opts.isStopping() || !(await jobsRepository.renew(ctx.db, job.id, opts.owner, opts.leaseMs))) return false;
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
    },
    { timeoutMs: ctx.env.SEND_BATCH_TIMEOUT_MS },
  );
  return new Map(answer.results.map((r) => [r.key, r]));
}

const STATE_OF = { sent: "sent", failed: "failed", opted_out: "skipped", pending: "waiting" } as const;

/** The outcomes in one transaction; a send missing from the answer stays `sending` (sent again with its key). */
async function record(ctx: TemplateJobsContext, jobId: string, rows: RecipientRow[], results: Map<string, TemplateSendOutcome>): Promise<void> {
  const outcomes: Array<{ seq: number; state: "sent" | "failed" | "skipped" | "waiting"; messageId: string | null; errorCode: string | null }> = [];
  for (const r of rows) {
    const result = results.get(sendKey(jobId, r.seq));
    if (!result) continue;
    outcomes.push({ seq: r.seq, state: STATE_OF[result.outcome], messageId: result.messageId, errorCode: result.error?.code ?? null });
  }
  await ctx.db.transaction(async (m) => {
    await jobsRepository.recordOutcomes(m, jobId, outcomes);
    await jobsRepository.completeIfDone(m, jobId);
  });
}
