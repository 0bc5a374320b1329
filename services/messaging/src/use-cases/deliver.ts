import { enqueue, RetryableError, type OutboxMessage } from "@platform/bus";
import { JOB_CANCELLED_FAILURE_CODE, MESSAGING_SUBJECTS, OPTED_OUT_FAILURE_CODE, TEMPLATE_JOBS_RPC } from "@platform/contracts";
import { CONNECTION_LOST_CODE, THROUGHPUT_ERROR_CODE, UNREADABLE_SUCCESS_CODE, type ProviderResult } from "@platform/provider-client";
import type { MessagingContext, StageClock } from "../context";
import { channelsRepository, type ChannelRow } from "../db/repositories/channels.repository";
import { messagesRepository, type MessageRow } from "../db/repositories/messages.repository";
import { messageStatusEvent } from "./events";
import { BULK_HORIZON_MS, reserveBulkPacingSlots, slowDownChannel } from "./pacing";
import { applyAcceptance } from "./process-provider-batch";
import { sleep } from "@platform/runtime";
import { iso } from "@platform/db";

/** Background retries: exponential backoff from 1 s, capped at 60 s, for up to 24 hours after the message was stored. */
export const RETRY_FOR_MS = 24 * 3_600_000;
/**
 * After a 130429 the backoff stops growing at this: the channel's adaptive
 * rate (ADR 0003) already spaces the sends, and a long backoff only keeps a
 * channel that is healthy again idle (it took 48 s after 10 s of 130429).
 */
export const THROTTLED_RETRY_MAX_MS = 2_000;
export const retryDelayMs = (attempt: number) => Math.min(60_000, 1_000 * 2 ** Math.max(0, attempt - 1));
/** The provider client's code for a call that got no answer within PROVIDER_TIMEOUT_MS (it may have been accepted). */
export const UNANSWERED_CODE = "timeout";
/** A send whose request died with it stored, handed to the worker by its Idempotency-Key's retry (the key's takeover). */
export const REQUEST_DIED = { code: "request_died", title: "The request that stored it died; its Idempotency-Key's retry handed it to the retry worker" };
/**
 * Attempts after which the provider may hold the message all the same: no answer, a connection lost after the request
 * went out, a 2xx without an id (or with its body cut off), or a request that died (perhaps during its provider call).
 */
const MAY_HAVE_BEEN_ACCEPTED = new Set([UNANSWERED_CODE, CONNECTION_LOST_CODE, UNREADABLE_SUCCESS_CODE, REQUEST_DIED.code]);
/**
 * How long a call unanswered at PROVIDER_TIMEOUT_MS is still read (the provider client's `lateAnswerMs`): until 1 s
 * before its retry is due, so that a late answer is recorded before any retry, here or on another replica, can start.
 */
export const lateAnswerMs = (unansweredRetryMs: number) => Math.max(0, unansweredRetryMs - 1_000);
/** How soon a retry waiting for the status callbacks to be applied looks again. */
const CALLBACKS_BEHIND_RETRY_MS = 1_000;
/** The delay before the next attempt after a transient failure with provider code `code`. */
export const transientRetryDelayMs = (attempt: number, code: string) =>
  code === THROUGHPUT_ERROR_CODE ? Math.min(THROTTLED_RETRY_MAX_MS, retryDelayMs(attempt)) : retryDelayMs(attempt);

/** The backoff before the retry of a message failing once more: by its failures so far, not its attempts. */
const backoffMs = (message: Pick<MessageRow, "failures">, code: string) => transientRetryDelayMs((message.failures ?? 0) + 1, code);

/** A request waits at most this long for its pacing slot; beyond it the send goes to the background worker. */
export const MAX_PACING_WAIT_MS = 2_000;

/** How long one sender owns a pending message: its pacing wait, one provider call and a margin. */
export const leaseMs = (providerTimeoutMs: number) => MAX_PACING_WAIT_MS + providerTimeoutMs + 2_000;
/** An attempt calls the provider only while its lease still covers the call's timeout plus this much. */
export const LEASE_MARGIN_MS = 1_000;
const LEASE_RAN_OUT = { code: "lease_ran_out", title: "The attempt's lease ran out before the provider call" };

export type AttemptOutcome =
  | { kind: "sent"; message: MessageRow }
  | { kind: "failed"; message: MessageRow }
  | { kind: "retry"; delayMs: number }
  /** A status callback (or another sender) settled the message while this attempt ran. */
  | { kind: "settled"; message: MessageRow | undefined };

/** Work item of one (re)send, published through the outbox. */
export function sendWorkItem(message: { id: string; organization_id: string }, attempt: number) {
  return {
    subject: MESSAGING_SUBJECTS.sendWork.subject,
    msgId: `send:${message.id}:${attempt}`,
    payload: { messageId: message.id, organizationId: message.organization_id },
  };
}

/** `sys.message.cancelled.v1` of a template send its job's cancel ended unsent (once per message: its msgId). */
export function cancelledFact(message: Pick<MessageRow, "id" | "organization_id" | "created_at">) {
  return {
    subject: MESSAGING_SUBJECTS.messageCancelled.subject,
    msgId: `cancelled:${message.id}`,
    payload: { organizationId: message.organization_id, messageId: message.id, createdAt: iso(message.created_at)! },
  };
}

/** `sys.message.pending.v1` of a message its first attempt left pending (once per message: its msgId). */
export function pendingFact(message: Pick<MessageRow, "id" | "organization_id" | "created_at">) {
  return {
    subject: MESSAGING_SUBJECTS.messagePending.subject,
    msgId: `pending:${message.id}`,
    payload: { organizationId: message.organization_id, messageId: message.id, createdAt: iso(message.created_at)! },
  };
}

/** Between two tries of recording an accepted send while the database refuses it. */
export const RECORD_RETRY_MS = { first: 100, max: 1_000 };

/**
 * The provider accepted attempt `attempt`: `sent` with its event, or, when a
 * status callback, a job's cancel or another sender settled the message
 * meanwhile, the acceptance applied as the provider's `sent` status
 * (`applyAcceptance`: a cancelled message is `sent` after all). If the database refuses the write, the answer is kept
 * (`ctx.accepted`) and recorded again until the database is back, and the
 * caller is told `sent` at once: calling the provider again would send the
 * message twice.
 */
async function recordAccepted(ctx: MessagingContext, message: MessageRow, attempt: number, providerMessageId: string): Promise<AttemptOutcome> {
  const sent: MessageRow = { ...message, status: "sent", provider_message_id: providerMessageId, error_code: null, error_title: null };
  const record = async (): Promise<AttemptOutcome> => {
    const mark = { id: message.id, attempt, providerMessageId, event: messageStatusEvent(sent, "sent") };
    if (await ctx.writes.markSent(mark, isTemplate(message) ? "bulk" : "send")) {
      return { kind: "sent", message: sent };
    }
    await applyAcceptance(ctx, message.channel_id, message.id, providerMessageId);
    const [now] = await messagesRepository.findByIds(ctx.db, message.organization_id, [message.id]);
    return { kind: "settled", message: now };
  };
  try {
    return await record();
  } catch (err) {
    ctx.log.error(
      { messageId: message.id, attempt, providerMessageId, err: (err as Error).message },
      "provider accepted the send but recording it failed; recording again until the database is back",
    );
    ctx.accepted.keep(
      message.id,
      (async () => {
        for (let delay = RECORD_RETRY_MS.first; !ctx.accepted.stopped; delay = Math.min(RECORD_RETRY_MS.max, delay * 2)) {
          await sleep(delay);
          try {
            await record();
            ctx.log.info({ messageId: message.id, attempt, providerMessageId }, "accepted send recorded after the database came back");
            return;
          } catch {
            // still down: keep the answer and try again
          }
        }
      })(),
    );
    return { kind: "sent", message: sent };
  }
}

const PACED = { code: "paced", title: "Waiting for the channel's throughput budget" };
const OPTED_OUT = { code: OPTED_OUT_FAILURE_CODE, title: "The contact opted out on this channel before the message was sent" };
const OPT_OUT_UNKNOWN = { code: "opt_out_check_unavailable", title: "The opt-out check did not answer; not sent yet" };
const JOB_STATE_UNKNOWN = { code: "job_state_unavailable", title: "The template job's state did not answer; not sent yet" };
const JOB_PAUSED = { code: "job_paused", title: "The template job is paused; sent when it resumes" };
export const JOB_CANCELLED = { code: JOB_CANCELLED_FAILURE_CODE, title: "The template job was cancelled before this send reached the provider" };
export const JOB_FAILED = { code: "job_failed", title: "The template job ended (its template was disabled or rejected) before this send reached the provider" };
/** A send without an Idempotency-Key whose caller left (or whose gateway call timed out, answered 503) before it reached the provider. */
export const REQUEST_ABANDONED = { code: "request_abandoned", title: "The request was abandoned before the send reached the provider; nothing was sent" };
/** A retried send whose job state did not answer asks again after this long. */
const JOB_STATE_RETRY_MS = 2_000;
/** A paused job's retried send looks again after this long. */
const JOB_PAUSED_RETRY_MS = 5_000;
/** Bound of the job state request (the same as the opt-out check's). */
const JOB_STATE_TIMEOUT_MS = 3_000;

const isTemplate = (m: MessageRow) => m.type === "template" && m.template_payload !== null;

/** The provider call of one message: its template rebuilt from the stored payload, or its text. */
function callProvider(ctx: MessagingContext, channel: ChannelRow, message: MessageRow) {
  if (isTemplate(message)) {
    const t = message.template_payload!;
    return ctx.provider.sendTemplate({
      phoneNumberId: channel.provider_phone_number_id,
      to: message.phone,
      template: t.template,
      headerMedia: t.headerMedia,
      bodyParameters: t.bodyParameters,
      buttonParameters: t.buttonParameters,
      callbackData: message.id,
    });
  }
  return ctx.provider.sendText({ phoneNumberId: channel.provider_phone_number_id, to: message.phone, text: message.text ?? "", callbackData: message.id });
}

/**
 * One provider attempt of a message the caller has leased (attempt number =
 * `message.attempts`): pacing slot, provider call, and the outcome stored with
 * its event in one transaction. `enqueueRetry` publishes a fresh work item on
 * a transient failure (the request path); the worker re-queues its own item
 * by nak with delay instead.
 */
export async function attemptSend(
  ctx: MessagingContext,
  message: MessageRow,
  opts: {
    enqueueRetry: boolean;
    channel?: ChannelRow;
    paceWaitMs?: number;
    jobSpacingMs?: number;
    stages?: StageClock;
    /** The request path of a send without an Idempotency-Key: true once its caller is gone (see checkAndCall). */
    abandoned?: () => boolean;
  },
): Promise<AttemptOutcome> {
  const attempt = message.attempts;
  const channel = opts.channel ?? (await channelsRepository.findById(ctx.db, message.organization_id, message.channel_id));
  if (!channel || !channel.connected) {
    return recordTransient(ctx, message, attempt, { code: "provider_not_connected", title: "The channel's provider connection is off" }, opts);
  }

  // A template send the worker retries (after a transient failure, or handed over for lack of a pacing slot) goes on
  // only while its job runs: not once the job was cancelled or failed, not while it is paused; and a throttled job's
  // retries keep its spacing. A batch's own sends were checked by the job's run when it handed them over.
  let jobSpacingMs = opts.jobSpacingMs;
  if (opts.paceWaitMs === undefined && message.template_job_id !== null) {
    let state: { status: string | null; minIntervalMs: number | null };
    try {
      state = await ctx.bus.request(TEMPLATE_JOBS_RPC.jobState, { organizationId: message.organization_id, jobId: message.template_job_id }, { timeoutMs: JOB_STATE_TIMEOUT_MS });
    } catch {
      // template-jobs restarting: asked again soon (a growing backoff kept sends back long after it was up).
      return recordTransient(ctx, message, attempt, JOB_STATE_UNKNOWN, opts, JOB_STATE_RETRY_MS);
    }
    if (state.status === "cancelled") return recordCancelled(ctx, message, attempt, JOB_CANCELLED);
    if (state.status === "failed") return recordCancelled(ctx, message, attempt, JOB_FAILED);
    if (state.status === "paused") return recordTransient(ctx, message, attempt, JOB_PAUSED, opts, JOB_PAUSED_RETRY_MS);
    jobSpacingMs = state.minIntervalMs ?? undefined;
  }

  // The request path (and a template batch) reserved its slot when it stored the message; the worker reserves one now,
  // only if it comes within its horizon: a template message within the bulk horizon (it yields to single sends), a text
  // within the 2 s a send may wait. Otherwise nothing is reserved and the message comes back when there is room, so
  // retries of a backed-up channel (after 130429) never book slots they cannot use and push everyone else out.
  // Time passed since the send's own opt-out check (a retry, a paced send): an opt-out set meanwhile must stop it.
  let waited = opts.paceWaitMs === undefined;
  let waitMs = opts.paceWaitMs;
  if (waitMs === undefined) {
    const r = await reserveBulkPacingSlots(ctx.db, channel.id, 1, isTemplate(message) ? BULK_HORIZON_MS : MAX_PACING_WAIT_MS);
    if (r && r.granted === 0) return recordTransient(ctx, message, attempt, PACED, opts, r.retryInMs);
    waitMs = r?.firstInMs ?? 0;
  }
  if (waitMs > MAX_PACING_WAIT_MS) {
    return recordTransient(ctx, message, attempt, PACED, opts, waitMs);
  }
  if (waitMs > 0) {
    await sleep(waitMs);
    waited = true;
  }
  opts.stages?.mark("pace");
  // Late slots must not turn into a burst: this process's calls on the channel stay one top-rate interval apart, and
  // never more than the rate in any second on the clock of the calls themselves. Texts (single sends and their
  // retries) do not queue behind template sends' spacing.
  const spacerFrom = performance.now();
  await ctx.spacer.turn(channel.id, channel.messages_per_second, !isTemplate(message));
  if (performance.now() - spacerFrom >= 1) waited = true;
  opts.stages?.mark("spacer");
  // A throttled job's sends: `throttlePerHour` apart on the clock of the calls, one at a time (`JobSpacer`).
  const jobTurn = jobSpacingMs && message.template_job_id ? await ctx.jobSpacer.turn(message.template_job_id, jobSpacingMs) : undefined;
  if (jobTurn && jobTurn.waitedMs >= 1) waited = true;
  try {
    return await checkAndCall(ctx, message, channel, attempt, waited, opts, jobTurn);
  } finally {
    jobTurn?.notCalled();
  }
}

/** The last steps of an attempt: the opt-out recheck of a send that waited, the lease, the provider call and its outcome. */
async function checkAndCall(
  ctx: MessagingContext,
  message: MessageRow,
  channel: ChannelRow,
  attempt: number,
  waited: boolean,
  opts: { enqueueRetry: boolean; stages?: StageClock; abandoned?: () => boolean },
  jobTurn: { called(): void } | undefined,
): Promise<AttemptOutcome> {
  // The caller of a send without a key left before the send reached the provider: it got no answer (the gateway's is
  // 503, "safe to retry"), so it will send again; this one ends `cancelled`, never sent (a retry is the only send).
  if (opts.abandoned?.()) return recordCancelled(ctx, message, attempt, REQUEST_ABANDONED);

  // Read-your-writes for opt-outs (contract section 2): once `set` has answered, nothing reaches the provider for that
  // number on that channel, also a send accepted before it and still waiting. A send that never waited was checked
  // just before it was stored.
  const recheck = async (): Promise<AttemptOutcome | undefined> => {
    let optedOut: boolean;
    try {
      optedOut = await ctx.optOuts.isOptedOut(message.organization_id, message.channel_id, message.phone);
    } catch {
      return recordTransient(ctx, message, attempt, OPT_OUT_UNKNOWN, opts);
    }
    if (optedOut) return recordFailed(ctx, message, attempt, OPTED_OUT);
    opts.stages?.mark("opt_out");
    return undefined;
  };
  if (waited) {
    const stopped = await recheck();
    if (stopped) return stopped;
  }
  // The channel's window on the clock of the calls as made: the recheck's round trip answers several sends at once
  // (ADR 0003, the send spacer). A send the gate held is rechecked again, so an opt-out set meanwhile still stops it.
  if ((await ctx.spacer.passGate(channel.id, channel.messages_per_second)) >= 1 && waited) {
    const stopped = await recheck();
    if (stopped) return stopped;
  }

  // The lease is what keeps the stalled-send sweep from handing this message to the worker while this attempt runs.
  // An attempt that reaches the provider too late to finish (a slow or busy process: pacing, event-loop stalls) could
  // overlap the worker's attempt and send twice: it leaves the message to the worker instead.
  if (message.lease_until && Date.now() > new Date(message.lease_until).getTime() - ctx.env.PROVIDER_TIMEOUT_MS - LEASE_MARGIN_MS) {
    ctx.log.warn({ messageId: message.id, attempt }, "lease too short for the provider call; left to the retry worker");
    return recordTransient(ctx, message, attempt, LEASE_RAN_OUT, opts, 0);
  }
  jobTurn?.called();
  const result = await callProvider(ctx, channel, message);
  opts.stages?.mark("provider");

  if (result.ok) {
    const outcome = await recordAccepted(ctx, message, attempt, result.providerMessageId);
    opts.stages?.mark("record");
    return outcome;
  }
  if (result.kind === "permanent") return recordFailed(ctx, message, attempt, { code: result.code, title: result.title });
  if (result.code === THROUGHPUT_ERROR_CODE) {
    // The decreased rate applies from the channel's next reservation on (ADR 0003, adaptive rate).
    await slowDownChannel(ctx.db, channel.id);
  }
  ctx.log.warn({ messageId: message.id, attempt, code: result.code, httpStatus: result.httpStatus }, "provider send failed transiently");
  if (MAY_HAVE_BEEN_ACCEPTED.has(result.code)) {
    // The provider may have accepted it: give its status callback time to settle the message before sending again,
    // and the call itself time to answer late (a slow provider's acceptance settles it then, without a callback).
    if (result.late) ctx.accepted.follow(followLateAnswer(ctx, message, attempt, result.late));
    const delayMs = Math.max(backoffMs(message, result.code), ctx.env.PROVIDER_UNANSWERED_RETRY_MS);
    return recordTransient(ctx, message, attempt, { code: result.code, title: result.title }, opts, delayMs);
  }
  return recordTransient(ctx, message, attempt, { code: result.code, title: result.title }, opts);
}

/**
 * The late answer of attempt `attempt`, whose call was sent and went unanswered within PROVIDER_TIMEOUT_MS: accepted
 * after all, the message is `sent` with the provider's id and one `message.sent` (its scheduled retry then finds
 * nothing to do; one call, where a retry would have been a second send); refused for good, it is `failed` with
 * `message.failed`. Nothing in time, or a transient answer: the retry stands as scheduled.
 */
async function followLateAnswer(ctx: MessagingContext, message: MessageRow, attempt: number, late: Promise<ProviderResult>): Promise<void> {
  const result = await late;
  try {
    if (result.ok) {
      const outcome = await recordAccepted(ctx, message, attempt, result.providerMessageId);
      ctx.log.info({ messageId: message.id, attempt, providerMessageId: result.providerMessageId, outcome: outcome.kind }, "provider accepted the send after the timeout");
    } else if (result.kind === "permanent") {
      await recordFailed(ctx, message, attempt, { code: result.code, title: result.title });
      ctx.log.info({ messageId: message.id, attempt, code: result.code }, "provider refused the send after the timeout");
    }
  } catch (err) {
    ctx.log.error({ messageId: message.id, attempt, err: (err as Error).message }, "recording the provider's late answer failed; the scheduled retry stands");
  }
}

/** Attempt `attempt` ends the message: `failed` with its event, unless something else settled it meanwhile. */
function recordFailed(ctx: MessagingContext, message: MessageRow, attempt: number, error: { code: string; title: string }): Promise<AttemptOutcome> {
  return ctx.db.transaction(async (tx) => {
    const failed = await messagesRepository.markFailed(tx, message.id, attempt, error);
    if (!failed) return { kind: "settled", message: undefined } as const;
    await enqueue(tx, "messaging", [messageStatusEvent(failed, "failed")]);
    return { kind: "failed", message: failed } as const;
  });
}

/**
 * The send's job was cancelled, or ended `failed` (its template disabled or rejected), before the send reached the
 * provider: `cancelled`, never sent, so no public event (`message.failed` is the provider's failure); analytics is
 * told by `sys.message.cancelled.v1` (ADR 0018).
 */
function recordCancelled(ctx: MessagingContext, message: MessageRow, attempt: number, error: { code: string; title: string }): Promise<AttemptOutcome> {
  return ctx.db.transaction(async (tx) => {
    const cancelled = await messagesRepository.settleUnsent(tx, message.id, attempt, "cancelled", error);
    if (!cancelled) return { kind: "settled", message: undefined } as const;
    await enqueue(tx, "messaging", [cancelledFact(cancelled)]);
    return { kind: "settled", message: cancelled } as const;
  });
}

/**
 * A leased attempt that will not call the provider now (no pacing slot in time, or it failed unexpectedly): the worker
 * takes the message after `delayMs`. Its lease is cleared, so the stalled-send sweep sees a send handed over, never one
 * whose request died unanswered (ADR 0025). `settled` when it is no longer pending.
 */
export function deferToWorker(ctx: MessagingContext, message: MessageRow, delayMs: number, why: { code: string; title: string } = PACED): Promise<AttemptOutcome> {
  return recordTransient(ctx, message, message.attempts, why, { enqueueRetry: true }, delayMs);
}

async function recordTransient(
  ctx: MessagingContext,
  message: MessageRow,
  attempt: number,
  error: { code: string; title: string },
  opts: { enqueueRetry: boolean },
  /** When set, the retry comes after exactly this long (a pacing slot's due time, an unanswered call's wait). */
  fixedDelayMs?: number,
): Promise<AttemptOutcome> {
  const giveUp = Date.now() - message.created_at.getTime() > RETRY_FOR_MS;
  // Waiting for the channel's budget (a paused job, a lease) is not a failure: it comes back when due, and the backoff
  // of the failures (the message's `failures`, not its attempts) does not grow by it.
  const failed = fixedDelayMs === undefined || MAY_HAVE_BEEN_ACCEPTED.has(error.code);
  const delayMs = fixedDelayMs ?? backoffMs(message, error.code);
  if (giveUp) return recordFailed(ctx, message, attempt, error);
  return ctx.db.transaction(async (tx) => {
    const scheduled = await messagesRepository.scheduleRetry(tx, message.id, attempt, delayMs, error, failed);
    if (!scheduled) return { kind: "settled", message: undefined } as const;
    const outbox: OutboxMessage[] = opts.enqueueRetry ? [sendWorkItem(message, attempt + 1)] : [];
    // The first attempt left it pending: analytics counts it from now on (the later ones would say the same again).
    if (attempt === 1) outbox.push(pendingFact(scheduled));
    await enqueue(tx, "messaging", outbox);
    return { kind: "retry", delayMs } as const;
  });
}

/**
 * The send worker's handler of one work item: skips messages already settled,
 * defers while another sender holds the lease or the backoff has not elapsed,
 * else leases the next attempt under the row lock and sends. A transient
 * failure naks the item with the backoff delay.
 */
export async function processSendWork(ctx: MessagingContext, messageId: string): Promise<void> {
  // The provider accepted it and this process is still recording that: never send it again.
  if (ctx.accepted.has(messageId)) return;
  const decision = await ctx.db.transaction(async (tx) => {
    const row = await messagesRepository.lockById(tx, messageId);
    if (!row || row.direction !== "outbound" || row.status !== "pending") return { kind: "done" } as const;
    const now = Date.now();
    if (row.lease_until && row.lease_until.getTime() > now) {
      // The request path (or another worker) is on it; look again soon.
      return { kind: "wait", delayMs: Math.min(2_000, row.lease_until.getTime() - now + 50) } as const;
    }
    if (row.lease_until) {
      // The lease ran out with no outcome recorded (an attempt ends by clearing it): its sender died, perhaps during
      // the provider call, which may have been accepted. Wait as for an unanswered call, so that the provider's status
      // callback settles it first and the customer is not sent it twice.
      const due = row.lease_until.getTime() + ctx.env.PROVIDER_UNANSWERED_RETRY_MS;
      if (due > now) return { kind: "wait", delayMs: Math.min(60_000, due - now + 10) } as const;
      // And until the callbacks stored by then are applied: after an outage they wait in JetStream (CallbackWatermark).
      if (!ctx.callbacks.appliedThrough(due)) return { kind: "wait", delayMs: CALLBACKS_BEHIND_RETRY_MS } as const;
      // A single send's first attempt is its request's: every answer the request gives clears the lease first (sent,
      // failed, handed to the worker). So its request died unanswered: the caller was told 503 ("safe to retry") or
      // nothing, and sends again; this one is not sent (ADR 0025). A retry with the request's Idempotency-Key revives
      // it (takeOverStoredSend).
      if (row.attempts === 1 && row.template_job_id === null) return { kind: "abandoned", row } as const;
    }
    if (row.next_attempt_at && row.next_attempt_at.getTime() > now) {
      return { kind: "wait", delayMs: Math.min(60_000, row.next_attempt_at.getTime() - now + 10) } as const;
    }
    // A call that went unanswered may have been accepted: its retry also waits for the callbacks stored until it was due.
    if (row.next_attempt_at && row.error_code !== null && MAY_HAVE_BEEN_ACCEPTED.has(row.error_code) && !ctx.callbacks.appliedThrough(row.next_attempt_at.getTime())) {
      return { kind: "wait", delayMs: CALLBACKS_BEHIND_RETRY_MS } as const;
    }
    return { kind: "send", row: await messagesRepository.lease(tx, row.id, leaseMs(ctx.env.PROVIDER_TIMEOUT_MS)) } as const;
  });
  if (decision.kind === "done") return;
  if (decision.kind === "wait") throw new RetryableError("message not due yet", Math.max(10, decision.delayMs));
  if (decision.kind === "abandoned") {
    const cancelled = await recordCancelled(ctx, decision.row, decision.row.attempts, REQUEST_ABANDONED);
    if (cancelled.kind === "settled" && cancelled.message) ctx.log.warn({ messageId }, "send whose request died unanswered cancelled, never sent");
    return;
  }
  const outcome = await attemptSend(ctx, decision.row, { enqueueRetry: false });
  if (outcome.kind === "retry") throw new RetryableError("provider send failed transiently", outcome.delayMs);
}
