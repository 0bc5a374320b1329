import { enqueue, RpcCallError } from "@platform/bus";
import { CONTACTS_RPC, RPC, type TemplateLookupRequest, type TemplateStopRequest, type TemplateStopResponse, type TemplateSendOutcome, type TemplateSendRequest, type TemplateSendResponse } from "@platform/contracts";
import { sqlState } from "@platform/db";
import { newId } from "@platform/id";
import { sleep } from "@platform/runtime";
import type { MessagingContext } from "../context";
import { channelsRepository, type ChannelRow } from "../db/repositories/channels.repository";
import { messagesRepository, sendRounds, type MessageRow, type TemplateInput } from "../db/repositories/messages.repository";
import type { TemplatePayload } from "../db/entities/message.entity";
import { attemptSend, cancelledFact, deferToWorker, JOB_CANCELLED, JOB_FAILED, leaseMs, MAX_PACING_WAIT_MS, type AttemptOutcome } from "./deliver";
import { conversationEvent } from "./events";

/** Bus calls to the contacts service of one batch. */
const CONTACTS_TIMEOUT_MS = 3_000;
const DEADLOCK_DETECTED = "40P01";

/**
 * How long a batch waits for pacing slots in all. Sends still without a slot
 * then are handed to the background worker (`pending`), so the answer comes
 * within this budget plus one provider call (PROVIDER_TIMEOUT_MS). The batch
 * is sized by the requester to about 200 ms of the channel's rate, so this
 * budget is only reached when single sends or a 130429 slow-down take the
 * channel's budget.
 */
export const TEMPLATE_BATCH_PACING_BUDGET_MS = MAX_PACING_WAIT_MS;

const unavailable = (what: string) => new RpcCallError("SERVICE_UNAVAILABLE", `${what} is unavailable; nothing was stored; retry later`, true);

/** The current outcome of a stored template message (a repeated key answers this, without calling the provider). */
export function outcomeOf(key: string, m: MessageRow): TemplateSendOutcome {
  switch (m.status) {
    case "sent":
    case "delivered":
    case "read":
      return { key, outcome: "sent", messageId: m.id, providerMessageId: m.provider_message_id };
    case "failed":
    case "cancelled":
      return {
        key,
        outcome: m.status,
        messageId: m.id,
        providerMessageId: m.provider_message_id,
        error: { code: m.error_code ?? "unknown", title: m.error_title ?? "Message failed" },
      };
    default:
      return { key, outcome: "pending", messageId: m.id, providerMessageId: m.provider_message_id };
  }
}

function outcomeOfAttempt(key: string, stored: MessageRow, outcome: AttemptOutcome): TemplateSendOutcome {
  switch (outcome.kind) {
    case "sent":
    case "failed":
      return outcomeOf(key, outcome.message);
    case "retry":
      return { key, outcome: "pending", messageId: stored.id, providerMessageId: null };
    case "settled":
      return outcome.message ? outcomeOf(key, outcome.message) : { key, outcome: "pending", messageId: stored.id, providerMessageId: null };
  }
}

/**
 * rpc.messaging.template.send.v1: one batch of one job's template sends on one
 * channel. Keys already stored answer their message's current outcome; the
 * new ones go through ONE opt-out check, ONE contacts request and ONE store
 * statement (unique send key: a racing duplicate stores and sends nothing),
 * then take bulk pacing slots (yielding to single sends) and are sent, each
 * with our message id as `biz_opaque_callback_data`. Transient failures stay
 * `pending` for the background worker.
 */
export async function sendTemplates(ctx: MessagingContext, req: TemplateSendRequest): Promise<TemplateSendResponse> {
  const { organizationId } = req;
  const channel = await channelsRepository.findById(ctx.db, organizationId, req.messagingChannelId);
  if (!channel) throw new RpcCallError("CHANNEL_NOT_FOUND", "Messaging channel not found", false);
  if (!channel.connected) throw new RpcCallError("PROVIDER_NOT_CONNECTED", "The channel's provider connection is off", false);

  const results = new Map<string, TemplateSendOutcome>();
  // One send per key (a key repeated inside the batch is the same send).
  const sends = [...new Map(req.sends.map((s) => [s.key, s])).values()];
  for (const m of await messagesRepository.findBySendKeys(ctx.db, organizationId, sends.map((s) => s.key))) {
    results.set(m.send_key!, outcomeOf(m.send_key!, m));
  }
  let fresh = sends.filter((s) => !results.has(s.key));
  // Every recipient of the batch gets its contact, an opted-out one too (contract: contacts are created by template
  // jobs); only the ones sent are stored as messages.
  const contactIds = new Map<string, string>();

  if (fresh.length > 0) {
    const phones = [...new Set(fresh.map((s) => s.phone))];
    // Right before storing, so an opt-out set before this check is never sent (read-your-writes).
    let optedOut: Set<string>;
    try {
      const answer = await ctx.bus.request(RPC.checkOptOuts, { organizationId, messagingChannelId: channel.id, phones }, { timeoutMs: CONTACTS_TIMEOUT_MS });
      optedOut = new Set(answer.optedOut);
    } catch {
      throw unavailable("The opt-out check");
    }
    try {
      const answer = await ctx.bus.request(CONTACTS_RPC.resolveContacts, { organizationId, phones }, { timeoutMs: CONTACTS_TIMEOUT_MS });
      phones.forEach((p, i) => contactIds.set(p, answer.contactIds[i]));
    } catch {
      throw unavailable("The contacts service");
    }
    for (const s of fresh) if (optedOut.has(s.phone)) results.set(s.key, { key: s.key, outcome: "opted_out", messageId: null, providerMessageId: null });
    fresh = fresh.filter((s) => !optedOut.has(s.phone));
  }

  if (fresh.length > 0) {
    const common = { template: req.template, headerMedia: req.headerMedia };
    const inputs: TemplateInput[] = fresh.map((s) => ({
      id: newId("message"),
      organizationId,
      channelId: channel.id,
      contactId: contactIds.get(s.phone)!,
      phone: s.phone,
      sendKey: s.key,
      templateJobId: req.templateJobId,
      payload: { ...common, bodyParameters: s.bodyParameters, buttonParameters: s.buttonParameters } satisfies TemplatePayload,
      leaseMs: leaseMs(ctx.env.PROVIDER_TIMEOUT_MS),
    }));

    const stored: Array<{ key: string; message: MessageRow }> = [];
    for (const round of sendRounds(inputs)) {
      for (const m of await storeRound(ctx, round)) stored.push({ key: m.send_key!, message: m });
    }
    // Keys a concurrent identical request stored first: answer that message as it stands.
    const storedKeys = new Set(stored.map((s) => s.key));
    const lost = fresh.filter((s) => !storedKeys.has(s.key)).map((s) => s.key);
    for (const m of await messagesRepository.findBySendKeys(ctx.db, organizationId, lost)) results.set(m.send_key!, outcomeOf(m.send_key!, m));

    for (const r of await sendPaced(ctx, channel, stored, req)) results.set(r.key, r);
  }

  return {
    results: req.sends.map(
      (s) => results.get(s.key) ?? { key: s.key, outcome: "pending", messageId: null, providerMessageId: null },
    ),
  };
}

/** rpc.messaging.template.lookup.v1: the current outcome of each stored key; keys never stored are left out. Sends nothing. */
export async function lookupTemplateSends(ctx: MessagingContext, req: TemplateLookupRequest): Promise<TemplateSendResponse> {
  const stored = await messagesRepository.findBySendKeys(ctx.db, req.organizationId, [...new Set(req.keys)]);
  return { results: stored.map((m) => outcomeOf(m.send_key!, m)) };
}

/** How often a stop looks again at a send whose attempt is running (ms). */
const STOP_POLL_MS = 50;

/**
 * rpc.messaging.template.stop.v1 (ADR 0018): a cancelled or failed job's sends still pending here (retrying after a
 * transient failure, or held back when the job stopped) end as `cancelled` (`job_cancelled` or `job_failed`; never sent, so no public event,
 * and analytics' `sys.message.cancelled.v1`), in one statement each round; an attempt running now is waited for (at
 * most its lease) and ends as it ends. Answers each one's final outcome.
 */
export async function stopTemplateSends(ctx: MessagingContext, req: TemplateStopRequest): Promise<TemplateStopResponse> {
  const { organizationId, templateJobId } = req;
  const asked = new Set(req.messageIds);
  const deadline = Date.now() + leaseMs(ctx.env.PROVIDER_TIMEOUT_MS);
  for (;;) {
    const pending = await messagesRepository.pendingOfJob(ctx.db, organizationId, templateJobId);
    if (pending.some((p) => !p.leased)) {
      await ctx.db.transaction(async (tx) => {
        const reason = req.jobStatus === "failed" ? JOB_FAILED : JOB_CANCELLED;
        const cancelled = await messagesRepository.cancelUnleasedOfJob(tx, organizationId, templateJobId, reason);
        await enqueue(tx, "messaging", cancelled.map(cancelledFact));
      });
      continue;
    }
    // What is left is an attempt running now: wait for the asked ones to end (at most a lease).
    if (!pending.some((p) => asked.has(p.id)) || Date.now() >= deadline) break;
    await sleep(STOP_POLL_MS);
  }
  const rows = await messagesRepository.findByIds(ctx.db, organizationId, [...asked]);
  return {
    results: rows.map((m) => ({
      messageId: m.id,
      outcome: m.status === "failed" || m.status === "cancelled" || m.status === "pending" ? m.status : ("sent" as const),
      errorCode: m.status === "failed" || m.status === "cancelled" ? m.error_code : null,
    })),
  };
}

/** One store statement; a deadlock with an inbound batch touching the same conversations rolled it back whole, so it runs again. */
async function storeRound(ctx: MessagingContext, round: TemplateInput[]): Promise<MessageRow[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await messagesRepository.storeTemplates(ctx.db, round, (c) => conversationEvent(c, "conversation.opened"));
    } catch (err) {
      if (sqlState(err) !== DEADLOCK_DETECTED || attempt >= 3) throw err;
    }
  }
}

/**
 * Takes bulk pacing slots for the stored messages, in order (`BulkPacer`:
 * one reservation loop per channel for every batch in flight, slots at most
 * BULK_HORIZON_MS ahead), and sends each at its slot (a throttled job's sends
 * also `jobSpacingMs` apart: `JobSpacer`); what has no slot within the batch's
 * budget is handed to the background worker and answered `pending`.
 */
async function sendPaced(
  ctx: MessagingContext,
  channel: ChannelRow,
  stored: Array<{ key: string; message: MessageRow }>,
  req: Pick<TemplateSendRequest, "templateJobId" | "issuedAt" | "minIntervalMs">,
): Promise<TemplateSendOutcome[]> {
  if (stored.length === 0) return [];
  const sends: Array<Promise<TemplateSendOutcome>> = [];
  let next = 0;
  // Offsets count from the moment the database took the reservation, some time before its answer arrived: waiting
  // them in full from now sends a little late, never early (late is harmless, early would bunch sends past the rate).
  const taking = ctx.bulkPacer.take(channel.id, stored.length, Date.now() + TEMPLATE_BATCH_PACING_BUDGET_MS, (offsets) => {
    for (const paceWaitMs of offsets) {
      const { key, message } = stored[next++];
      sends.push(
        // Held, not slept: a single send of this process may take this slot and leave us its later one (yieldTo).
        ctx.bulkPacer
          .hold(channel.id, paceWaitMs)
          .then(() =>
            // The job stopped (paused, cancelled, failed) while this send waited for its slot: not sent now; the
            // retry worker asks the job's state before it sends it (ADR 0018).
            ctx.stoppedJobs.stoppedSince(req.templateJobId, req.issuedAt)
              ? handOver(ctx, key, message, STOPPED_HAND_OVER_MS)
              : attemptSend(ctx, message, { enqueueRetry: true, channel, paceWaitMs: 0, jobSpacingMs: req.minIntervalMs }).then((outcome) => outcomeOfAttempt(key, message, outcome)),
          )
          .catch((err: Error) => {
            // Stored and leased: the stalled-send sweep hands it to the worker once the lease ends.
            ctx.log.error({ messageId: message.id, err: err.message }, "template send attempt failed unexpectedly; left to the retry worker");
            return { key, outcome: "pending", messageId: message.id, providerMessageId: null } as const;
          }),
      );
    }
  });
  try {
    if ((await taking) > 0) sends.push(...stored.slice(next).map(({ key, message }) => handOver(ctx, key, message)));
  } catch (err) {
    // The pacing row could not be read: the rest stay stored and leased; the stalled-send sweep hands them to the worker.
    ctx.log.error({ channelId: channel.id, err: (err as Error).message }, "template batch pacing failed; the rest is left to the retry worker");
    sends.push(...stored.slice(next).map(({ key, message }) => Promise.resolve({ key, outcome: "pending", messageId: message.id, providerMessageId: null } as const)));
  }
  return Promise.all(sends);
}

/** A send of a job that stopped goes to the worker after this long (it asks the job's state then). */
const STOPPED_HAND_OVER_MS = 1_000;

/** No slot within the budget (or its job stopped): the worker sends it after `delayMs` (at once by default). */
async function handOver(ctx: MessagingContext, key: string, message: MessageRow, delayMs = 0): Promise<TemplateSendOutcome> {
  try {
    await deferToWorker(ctx, message, delayMs);
  } catch (err) {
    ctx.log.error({ messageId: message.id, err: (err as Error).message }, "template send hand-over failed; left to the stalled-send sweep");
  }
  return { key, outcome: "pending", messageId: message.id, providerMessageId: null };
}
