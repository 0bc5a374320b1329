import { RetryableError } from "@platform/bus";
import type { z } from "zod";
import type { DomainEvent } from "@platform/contracts";
import type { TemplateJobsContext } from "../context";
import { jobsRepository } from "../db/repositories/jobs.repository";
import { run, SCHEMA } from "../db/repositories/queryable";

/**
 * A `message.sent` / `message.failed` of a template send: a recipient left
 * `waiting` becomes `sent` / `failed` (counted once), and the job completes
 * when it was the last open one. An event that arrives before the batch's
 * answer was recorded (the row is still `sending`, without its message id)
 * is retried shortly; events of sends already final change nothing.
 */
export async function finalizeSend(ctx: TemplateJobsContext, event: z.infer<typeof DomainEvent>): Promise<void> {
  const data = event.data as { templateJobId?: string; messageId?: string; error?: { code?: string } };
  if (!data.templateJobId || !data.messageId) return;
  const jobId = data.templateJobId;
  // Recorded as final by this process a moment ago (the usual case: messaging answered `sent`): nothing to do.
  if (ctx.finalMessages.has(data.messageId)) return;
  const state = event.event === "message.failed" ? "failed" : "sent";
  // Most events are of sends already recorded as final (messaging answered `sent`): one indexed read, no transaction.
  const current = await run<{ state: string }>(ctx.db, `SELECT state FROM ${SCHEMA}.job_recipients WHERE job_id = $1 AND message_id = $2`, [jobId, data.messageId]);
  if (current.length && current[0].state !== "waiting") return;
  const result = await ctx.db.transaction(async (m) => {
    const outcome = await jobsRepository.finalizeMessage(m, jobId, data.messageId!, state, data.error?.code ?? null);
    if (outcome === "updated") await jobsRepository.completeIfDone(m, jobId);
    return outcome;
  });
  if (result !== "unknown") return;
  const inFlight = await run(
    ctx.db,
    `SELECT 1 FROM ${SCHEMA}.jobs j WHERE j.id = $1 AND j.status IN ('running', 'paused')
       AND EXISTS (SELECT 1 FROM ${SCHEMA}.job_recipients r WHERE r.job_id = j.id AND r.state = 'sending')`,
    [jobId],
  );
  if (inFlight.length) throw new RetryableError("template send not recorded yet", 1_000);
}
