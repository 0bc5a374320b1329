import { dateInstant, MESSAGING_RPC, RPC, TEMPLATE_JOBS_SUBJECTS, type JobStateResponse, type PageQuery, type TemplateJob, type TemplateJobList, type TemplateSendJobRequest } from "@platform/contracts";
import { BusUnavailableError, outboxOrigin, RpcCallError } from "@platform/bus";
import { iso } from "@platform/db";
import { ApiError, CursorCodec, type ErrorDetail } from "@platform/http";
import { sleep } from "@platform/runtime";
import { newId } from "@platform/id";
import type { TemplateJobsContext } from "../context";
import { FINAL_JOB_STATES, jobsRepository, type JobRow } from "../db/repositories/jobs.repository";
import { organizationsRepository } from "../db/repositories/organizations.repository";
import { finalStateOf } from "./final-state";
import type { Queryable } from "../db/repositories/queryable";
import { templatesRepository, type TemplateRow } from "../db/repositories/templates.repository";

export function toJob(row: JobRow): TemplateJob {
  return {
    id: row.id,
    status: row.status,
    templateId: row.template_id,
    messagingChannelId: row.messaging_channel_id,
    scheduledFor: iso(row.scheduled_for),
    throttlePerHour: row.throttle_per_hour,
    recipients: row.recipients,
    sent: row.sent,
    failed: row.failed,
    skipped: row.skipped,
    startedAt: iso(row.started_at),
    completedAt: iso(row.completed_at),
    createdAt: iso(row.created_at)!,
  };
}

/** The template a send names: an internal id, or the provider's numeric id with its templateAccountId. */
async function findTemplate(ctx: TemplateJobsContext, organizationId: string, body: TemplateSendJobRequest): Promise<TemplateRow> {
  let template: TemplateRow | null;
  if (/^\d+$/.test(body.templateId)) {
    if (body.templateAccountId === undefined) {
      throw ApiError.validation([{ path: "templateAccountId", message: "is required when templateId is a numeric provider template id" }]);
    }
    template = await templatesRepository.byProviderId(ctx.db, organizationId, body.templateId, body.templateAccountId);
  } else {
    template = await templatesRepository.byId(ctx.db, organizationId, body.templateId);
  }
  if (!template) throw new ApiError("TEMPLATE_NOT_FOUND", "Template not found");
  return template;
}

/** The channel must exist in the organization (messaging owns channels: one bus round trip). */
async function requireChannel(ctx: TemplateJobsContext, organizationId: string, channelId: string): Promise<void> {
  let answer;
  try {
    answer = await ctx.bus.request(RPC.lookupChannel, { organizationId, channelId }, { timeoutMs: ctx.env.RPC_TIMEOUT_MS });
  } catch (err) {
    if (err instanceof BusUnavailableError || (err instanceof RpcCallError && err.retryable)) throw ApiError.unavailable();
    throw err;
  }
  if (!answer.channel) throw new ApiError("CHANNEL_NOT_FOUND", "Channel not found");
  if (!answer.channel.connected) throw new ApiError("PROVIDER_NOT_CONNECTED", "The channel's provider connection is off");
}

/**
 * POST /api/v1/templates/send: checks the template (found, approved, body
 * parameter count of every recipient) and the channel, then stores the job
 * and its recipients in one transaction: a handful of bulk statements
 * whatever the number of recipients. The body was parsed (and every phone
 * normalized) once, by the route.
 */
export async function createJob(
  ctx: TemplateJobsContext,
  organizationId: string,
  body: TemplateSendJobRequest,
  /** Runs in the job's own transaction with the answer (the request's Idempotency-Key completes there: no window). */
  onCreated?: (q: Queryable, job: TemplateJob) => Promise<void>,
): Promise<TemplateJob> {
  const template = await findTemplate(ctx, organizationId, body);
  const n = body.recipients.length;
  const details: ErrorDetail[] = [];
  for (let i = 0; i < n && details.length < 100; i++) {
    const count = body.recipients[i].bodyParameters?.length ?? 0;
    if (count !== template.body_parameter_count) {
      details.push({
        path: `recipients.${i}.bodyParameters`,
        message: `must have exactly ${template.body_parameter_count} item(s), the template's body parameter count (has ${count})`,
      });
    }
  }
  if (details.length) throw ApiError.validation(details);
  if (template.status !== "approved") throw new ApiError("TEMPLATE_NOT_APPROVED", `Template is ${template.status}, not approved`);
  await requireChannel(ctx, organizationId, body.messagingChannelId);

  // A date-only `scheduledAt` is 00:00:00.000Z of that day; a date-time without an offset is UTC (service-spec.md).
  const scheduledAt = body.scheduledAt == null ? null : new Date(dateInstant(body.scheduledAt)!);
  const scheduledFor = scheduledAt && scheduledAt.getTime() > Date.now() ? scheduledAt : null;
  // A recipient is never sent twice by one job: a phone listed again (phones are normalized by now, so "1 555 000 3001"
  // and "+15550003001" are one) is stored `skipped` and never sent; the first entry is the one sent.
  const duplicates = duplicatePhones(body.recipients);
  const job = await ctx.db.transaction(async (m) => {
    const row = await jobsRepository.insert(m, {
      id: newId("job"),
      organization_id: organizationId,
      template_id: template.id,
      messaging_channel_id: body.messagingChannelId,
      header_media: body.headerMedia ?? null,
      recipients: n,
      scheduled_for: scheduledFor,
      throttle_per_hour: body.throttlePerHour ?? null,
      skipped: duplicates.size,
      // The request's id and trace, continued by the job's run.
      ...(({ requestId, traceparent }) => ({ request_id: requestId, traceparent }))(outboxOrigin()),
    });
    await jobsRepository.insertRecipients(m, row.id, body.recipients, duplicates);
    const created = toJob(row);
    if (onCreated) await onCreated(m, created);
    return created;
  });
  return job;
}

/** Indexes of the recipients whose (normalized) phone an earlier entry of the request already has. */
export function duplicatePhones(recipients: ReadonlyArray<{ phone: string }>): Set<number> {
  const seen = new Set<string>();
  const duplicates = new Set<number>();
  for (let i = 0; i < recipients.length; i++) {
    if (seen.has(recipients[i].phone)) duplicates.add(i);
    else seen.add(recipients[i].phone);
  }
  return duplicates;
}

export async function getJob(ctx: TemplateJobsContext, organizationId: string, jobId: string): Promise<TemplateJob> {
  const row = await jobsRepository.byId(ctx.db, organizationId, jobId);
  if (!row) throw new ApiError("NOT_FOUND", "Template send job not found");
  return toJob(row);
}

interface JobCursor {
  o: string;
  i: string;
}
const isJobCursor = (p: unknown): p is JobCursor => {
  const v = p as Partial<JobCursor> | null;
  return typeof v === "object" && v !== null && typeof v.o === "string" && typeof v.i === "string";
};
const jobCursorCodec = (internalToken: string) => new CursorCodec<JobCursor>(`template-jobs:${internalToken}`, "template-jobs.v1");

/** The organization's jobs with their progress, newest first; the keyset cursor is bound to the organization. */
export async function listJobs(ctx: TemplateJobsContext, organizationId: string, query: PageQuery): Promise<TemplateJobList> {
  const codec = jobCursorCodec(ctx.env.INTERNAL_TOKEN);
  const before = query.cursor === undefined ? null : codec.decode(query.cursor, (x): x is JobCursor => isJobCursor(x) && x.o === organizationId).i;
  const rows = await jobsRepository.pageNewestFirst(ctx.db, organizationId, before, query.limit + 1);
  const more = rows.length > query.limit;
  const items = (more ? rows.slice(0, query.limit) : rows).map(toJob);
  const last = items[items.length - 1];
  return { items, ...(more && last ? { nextCursor: codec.encode({ o: organizationId, i: last.id }) } : {}) };
}

/**
 * A run that holds a job asked to stop records the batches it has in flight (messaging paces them, at most about a
 * second of the channel's rate, or MAX_PACING_WAIT_MS and a provider call) before it lets go and the stop takes effect;
 * the cancel waits for that up to this long, so that its answer is where the job stopped. A run that died holds its
 * lease until JOB_LEASE_MS: the cancel then makes the stop take effect itself, and the settling sweep records what that
 * run had sent (ADR 0018, ADR 0023).
 */
export const CANCEL_WAIT_MS = 10_000;
const CANCEL_POLL_MS = 25;

const isFinal = (status: JobRow["status"]) => (FINAL_JOB_STATES as readonly string[]).includes(status);

/**
 * Cancels a job. The answer comes once the job is `cancelled` (or ended otherwise meanwhile): a run holding it (on
 * any replica) has stopped and the sends messaging held or retried are ended, so no send of the job reaches the
 * provider after it, and its counts are final (the exceptions: ADR 0023). Until then the job keeps its status. An
 * already final job is answered unchanged; a cancel repeated while the first waits (a client's retry) waits as well.
 */
export async function cancelJob(ctx: TemplateJobsContext, organizationId: string, jobId: string): Promise<TemplateJob> {
  const owner = `cancel:${newId("request")}`;
  const asked = await jobsRepository.requestStop(ctx.db, organizationId, jobId, "cancelled", owner, ctx.env.JOB_LEASE_MS);
  if (!asked) throw new ApiError("NOT_FOUND", "Template send job not found");
  const { row, requested } = asked;
  if (isFinal(row.status)) return toJob(row);
  if (requested) {
    announceStopped(ctx, [jobId]);
    ctx.cancelledJobs.add(jobId);
  }
  if (requested && row.lease_owner === owner) {
    // Nobody ran it: this cancel stops it, as a run would have.
    try {
      await stopWaitingSends(ctx, organizationId, jobId);
    } finally {
      await jobsRepository.release(ctx.db, jobId, owner, null);
    }
  } else {
    // The holder applies the stop when it lets go: here, when its run ends (it wakes us); elsewhere, seen by polling.
    for (const deadline = Date.now() + CANCEL_WAIT_MS; ; ) {
      const now = await jobsRepository.byId(ctx.db, organizationId, jobId);
      if (!now || now.stop_as === null) break;
      if (Date.now() >= deadline) {
        await jobsRepository.forceStop(ctx.db, jobId);
        break;
      }
      await (ctx.runs.inFlight(jobId) ? ctx.runs.settled(jobId, CANCEL_POLL_MS * 4) : sleep(CANCEL_POLL_MS));
    }
  }
  return toJob((await jobsRepository.byId(ctx.db, organizationId, jobId)) ?? row);
}

/**
 * Recipients `waiting` (messaging retries their send after a transient failure, or holds it back since the job
 * stopped): messaging ends the ones it still holds as `cancelled` (never sent, no event), waits for an attempt running
 * now, and answers each outcome, recorded here before the cancel answers so that its counts are final (ADR 0018).
 * Messaging not answering: those stay `waiting`, uncounted, as `cancelled` ones are; the events of any that do end
 * otherwise (an attempt running then) still settle them.
 */
export async function stopWaitingSends(ctx: TemplateJobsContext, organizationId: string, jobId: string, jobStatus: "cancelled" | "failed" = "cancelled"): Promise<void> {
  const waiting = await jobsRepository.waitingMessageIds(ctx.db, jobId);
  if (waiting.length === 0) return;
  try {
    for (let i = 0; i < waiting.length; i += STOP_CHUNK) {
      const messageIds = waiting.slice(i, i + STOP_CHUNK);
      const { results } = await ctx.bus.request(MESSAGING_RPC.stopTemplateSends, { organizationId, templateJobId: jobId, messageIds, jobStatus }, { timeoutMs: STOP_TIMEOUT_MS });
      const outcomes = results
        .filter((r) => r.outcome !== "pending")
        .map((r) => ({ messageId: r.messageId, state: finalStateOf(r.outcome as Exclude<typeof r.outcome, "pending">, r.errorCode), errorCode: r.errorCode }));
      await ctx.db.transaction((m) => jobsRepository.finalizeMessages(m, jobId, outcomes));
    }
  } catch (err) {
    ctx.log.warn({ jobId, err: (err as Error).message }, "stopping a cancelled job's retried sends failed; their events will settle them");
  }
}
/** Message ids per stop request (its limit). */
const STOP_CHUNK = 1_000;
/** Bound of the stop request: messaging waits for an attempt running now (its lease: pacing, a provider call, a margin). */
const STOP_TIMEOUT_MS = 30_000;

/**
 * rpc.template-jobs.job.state.v1: what messaging needs before it retries one of the job's sends. A running job of an
 * `inactive` organization answers `paused`: its sends wait, as a paused job's do, until the plan changes (ADR 0022).
 */
export async function jobState(ctx: TemplateJobsContext, organizationId: string, jobId: string): Promise<JobStateResponse> {
  const row = await jobsRepository.byId(ctx.db, organizationId, jobId);
  if (!row) return { status: null, minIntervalMs: null };
  // A job asked to stop is, for its sends, what it is about to be.
  if (row.stop_as !== null) return { status: row.stop_as, minIntervalMs: null };
  const held = (row.status === "running" || row.status === "queued") && (await organizationsRepository.isInactive(ctx.db, organizationId));
  return { status: held ? "paused" : row.status, minIntervalMs: row.throttle_per_hour === null ? null : 3_600_000 / row.throttle_per_hour };
}

/**
 * Tells every messaging replica that these jobs stopped sending (paused, cancelled, failed): the sends of their
 * batches still waiting for a slot there are not made (`TEMPLATE_JOBS_SUBJECTS.jobsStopped`). Best effort: a lost
 * broadcast leaves those to finish as before.
 */
export function announceStopped(ctx: TemplateJobsContext, jobIds: string[]): void {
  if (jobIds.length === 0) return;
  try {
    ctx.bus.broadcast(TEMPLATE_JOBS_SUBJECTS.jobsStopped, { jobIds, at: Date.now() });
  } catch (err) {
    ctx.log.warn({ jobIds, err: (err as Error).message }, "announcing stopped jobs failed");
  }
}
