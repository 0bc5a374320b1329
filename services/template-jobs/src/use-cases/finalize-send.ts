import { RetryableError } from "@platform/bus";
import type { z } from "zod";
import { OPTED_OUT_FAILURE_CODE, type DomainEvent } from "@platform/contracts";
import type { TemplateJobsContext } from "../context";
import { jobsRepository } from "../db/repositories/jobs.repository";
import { run, SCHEMA } from "../db/repositories/queryable";

/**
 * A `message.sent` / `message.failed` of a template send: a recipient left
 * `waiting` (or `cancelled`, a call the provider accepted after all) becomes `sent` / `failed` (counted once), and the job completes
 * when it was the last open one. An event that arrives before the batch's
 * answer was recorded (no recipient has its message id yet) is retried
 * shortly while the job runs; events of sends already final change nothing.
 */
export async function finalizeSend(ctx: TemplateJobsContext, event: z.infer<typeof DomainEvent>): Promise<void> {
  const data = event.data as { templateJobId?: string; messageId?: string; error?: { code?: string } };
  if (!data.templateJobId || !data.messageId) return;
  const jobId = data.templateJobId;
  // Recorded as final by this process a moment ago (the usual case: messaging answered `sent`): nothing to do.
  if (ctx.finalMessages.has(data.messageId)) return;
  // Its batch is likely still in flight here: wait for the batches of the job to be recorded rather than for a
  // redelivery, until this message is among them (or none of the job's batches is left in flight here).
  for (const deadline = Date.now() + ctx.env.SEND_BATCH_TIMEOUT_MS; ctx.batches.inFlight(jobId) && !ctx.waitingMessages.has(data.messageId); ) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    await ctx.batches.settled(jobId, left);
    if (ctx.finalMessages.has(data.messageId)) return;
  }
  // A send an opt-out stopped while it waited (messaging's `contact_opted_out`) was never sent: skipped, as the
  // contract has opted-out recipients.
  const state = event.event === "message.sent" ? "sent" : data.error?.code === OPTED_OUT_FAILURE_CODE ? "skipped" : "failed";
  // Most events are of sends already recorded as final (messaging answered `sent`): one indexed read, no transaction.
  const current = await run<{ state: string }>(ctx.db, `SELECT state FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND message_id = $2`, [jobId, data.messageId]);
  // `cancelled`: the job stopped a send whose provider call had gone unanswered, and the provider had accepted it
  // after all: its status callbacks say so now, and the recipient is counted as what happened (ADR 0018).
  if (current.length && current[0].state !== "waiting" && current[0].state !== "cancelled") return;
  const result = await ctx.db.transaction(async (m) => {
    const outcome = await jobsRepository.finalizeMessage(m, jobId, data.messageId!, state, data.error?.code ?? null);
    if (outcome === "updated") await jobsRepository.completeIfDone(m, jobId);
    return outcome;
  });
  if (result !== "unknown") return;
  // Not recorded yet: while the job runs, its batch answer (or, after a crash, the batch sent again with the same
  // keys) will record this message. (Looking for the job's `sending` rows instead read every open row of the job:
  // 2 ms per early event, the largest cost of a 50,000-recipient job in Postgres.)
  const running = await run(ctx.db, `SELECT 1 FROM ${SCHEMA}.jobs WHERE id = $1 AND status IN ('running', 'paused')`, [jobId]);
  if (running.length) throw new RetryableError("template send not recorded yet", 1_000);
}
