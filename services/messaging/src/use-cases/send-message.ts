import { normalizePhone, OPTED_OUT_FAILURE_CODE, type MessageResponse, type SendMessageRequest } from "@platform/contracts";
import { ApiError } from "@platform/http";
import { newId } from "@platform/id";
import { StageClock, type MessagingContext } from "../context";
import { messagesRepository, type MessageRow } from "../db/repositories/messages.repository";
import { enqueue } from "@platform/bus";
import { attemptSend, deferToWorker, leaseMs, MAX_PACING_WAIT_MS, REQUEST_ABANDONED, REQUEST_DIED, sendWorkItem } from "./deliver";

export { SERVICE_WINDOW_MS } from "./send-lookups";

export type SendMessageResult = { status: 200; body: MessageResponse };

const ATTEMPT_FAILED = { code: "attempt_failed", title: "The request's attempt failed unexpectedly; the retry worker sends it" };

/**
 * POST /api/v1/messages: channel → opt-out (over the bus, fail closed) →
 * 24-hour window → contact → store (message, conversation, event and pacing
 * slot in one statement) → provider. The stored `pending` row, leased to this request,
 * is the durable record of the send: should the process die before the
 * provider answered, the lease runs out and the stalled-send sweep hands the
 * message to the retry worker (work.messaging.send.v1), which sends it once.
 */
export async function sendMessage(
  ctx: MessagingContext,
  organizationId: string,
  input: SendMessageRequest,
  messageId = newId("message"),
  /** A request without an Idempotency-Key: true once its caller left; a send not yet at the provider then ends `cancelled`. */
  abandoned?: () => boolean,
): Promise<SendMessageResult> {
  const phone = normalizePhone(input.to);
  if (!phone) throw ApiError.validation([{ path: "to", message: "is not a valid phone number" }]);

  const stages = ctx.sendStages && new StageClock(ctx.sendStages);
  const lookup = await ctx.lookups.forSend(organizationId, input.messagingChannelId, phone);
  stages?.mark("lookup");
  if (!lookup) throw new ApiError("CHANNEL_NOT_FOUND", "Messaging channel not found");
  const { channel } = lookup;
  if (!channel.connected) throw new ApiError("PROVIDER_NOT_CONNECTED", "The channel's provider connection is off");

  if (await ctx.optOuts.isOptedOut(organizationId, channel.id, phone)) throw new ApiError("CONTACT_OPTED_OUT", "Contact opted out");
  stages?.mark("opt_out");

  if (!lookup.windowOpen) {
    throw new ApiError(
      "OUTSIDE_SERVICE_WINDOW",
      "The contact's last message on this channel is older than 24 hours (or absent); use an approved template",
    );
  }

  let contactId = ctx.contactIds.get(organizationId, phone);
  if (!contactId) {
    try {
      contactId = await ctx.contactResolver.resolve(organizationId, phone);
    } catch {
      throw ApiError.unavailable("The contacts service is unavailable; nothing was sent; retry later");
    }
    ctx.contactIds.set(organizationId, phone, contactId);
  }
  stages?.mark("contact");

  const { message: stored, paceWaitMs } = await ctx.writes.store({
    id: messageId,
    organizationId,
    channelId: channel.id,
    contactId,
    phone,
    text: input.text,
    leaseMs: leaseMs(ctx.env.PROVIDER_TIMEOUT_MS),
  });
  stages?.mark("store");

  const base = { id: stored.id, conversationId: stored.conversation_id, contactId };
  let outcome;
  try {
    // Single sends go before this process's bulk (template) sends on the channel: take the earliest bulk slot held here, if
    // any starts before ours (ADR 0003). Beyond the wait a request may take, the send goes to the worker as it is.
    const waitMs = paceWaitMs <= MAX_PACING_WAIT_MS ? ctx.bulkPacer.yieldTo(channel.id, paceWaitMs) : paceWaitMs;
    outcome = await attemptSend(ctx, stored, { enqueueRetry: true, channel, paceWaitMs: waitMs, stages, abandoned });
  } catch (err) {
    ctx.log.error({ messageId: stored.id, err: (err as Error).message }, "send attempt failed unexpectedly; handing it to the retry worker");
    // Answered 200 only once the worker owns the message (or the provider has it): a send left under its request's
    // lease would be taken for one whose request died unanswered, and not sent (ADR 0025).
    outcome = await deferToWorker(ctx, stored, 0, ATTEMPT_FAILED).catch(() => undefined);
    if (!outcome) {
      if (ctx.accepted.has(stored.id)) return { status: 200, body: { ...base, providerMessageId: null } };
      throw ApiError.unavailable("The send could not be completed; nothing was sent; retry");
    }
  }
  switch (outcome.kind) {
    case "sent":
      return { status: 200, body: { ...base, providerMessageId: outcome.message.provider_message_id } };
    case "failed":
      throw failedSend(outcome.message);
    case "retry":
      return { status: 200, body: { ...base, providerMessageId: null } };
    case "settled":
      if (outcome.message && refusedAtSend(outcome.message)) throw failedSend(outcome.message);
      // Its caller left before the send (nobody reads this answer); what it would have been told: nothing was sent.
      if (outcome.message?.status === "cancelled") throw ApiError.unavailable("The request was abandoned before the send; nothing was sent; retry");
      return { status: 200, body: { ...base, providerMessageId: outcome.message?.provider_message_id ?? null } };
  }
}

/**
 * The retry of a request with an Idempotency-Key whose first request died (the key's takeover): the message that
 * request stored is the answer, and it is sent once. Still under the dead request's lease, it is handed to the worker
 * now; already cancelled as abandoned by the stalled-send sweep (ADR 0025: it could not know the request had a key),
 * it is revived and handed over. Undefined when no such message exists.
 */
export async function takeOverStoredSend(ctx: MessagingContext, organizationId: string, messageId: string): Promise<{ status: number; body: unknown } | undefined> {
  const [m] = await messagesRepository.findByIds(ctx.db, organizationId, [messageId]);
  if (!m) return undefined;
  if (m.status === "pending" && m.lease_until !== null && m.attempts === 1 && m.template_job_id === null) {
    // The dead request may have been in its provider call: the worker waits as for an unanswered call (and for the
    // callbacks stored by then), so that the provider's callback settles a call it accepted.
    await deferToWorker(ctx, m, Math.max(0, m.lease_until.getTime() + ctx.env.PROVIDER_UNANSWERED_RETRY_MS - Date.now()), REQUEST_DIED);
  } else if (m.status === "cancelled" && m.error_code === REQUEST_ABANDONED.code && m.template_job_id === null) {
    await ctx.db.transaction(async (tx) => {
      const revived = await messagesRepository.reviveAbandoned(tx, m.id);
      if (revived) await enqueue(tx, "messaging", [sendWorkItem(revived, revived.attempts)]);
    });
  }
  return answerOfStoredSend(ctx, organizationId, messageId);
}

/**
 * The answer a send gave, or would have given, for a message already stored
 * (an Idempotency-Key's request that died after storing it): the message as
 * it stands now. Undefined when no such message exists.
 */
export async function answerOfStoredSend(ctx: MessagingContext, organizationId: string, messageId: string): Promise<{ status: number; body: unknown } | undefined> {
  const [m] = await messagesRepository.findByIds(ctx.db, organizationId, [messageId]);
  if (!m) return undefined;
  if (refusedAtSend(m)) {
    const rejected = failedSend(m);
    return { status: rejected.status, body: rejected.toJSON() };
  }
  return { status: 200, body: { id: m.id, conversationId: m.conversation_id, contactId: m.contact_id, providerMessageId: m.provider_message_id } };
}

/**
 * A failed send the provider never accepted. One it accepted (it has a provider id) and then reported `failed` (a
 * status callback that came before the provider's answer was recorded) answers 200 like any accepted send: the
 * failure is told by `message.failed`, not as a refusal of a message the provider took.
 */
function refusedAtSend(m: Pick<MessageRow, "status" | "provider_message_id">): boolean {
  return m.status === "failed" && m.provider_message_id === null;
}

/**
 * The answer of a send that ended `failed` during its request: 403 CONTACT_OPTED_OUT when an opt-out set while it
 * waited for its pacing slot stopped it (the provider never saw it; the same answer as an opt-out set before the
 * request), else 400 UPSTREAM_REJECTED (the provider refused it for good).
 */
function failedSend(m: Pick<MessageRow, "error_code" | "error_title">): ApiError {
  if (m.error_code === OPTED_OUT_FAILURE_CODE) return new ApiError("CONTACT_OPTED_OUT", "Contact opted out");
  return new ApiError("UPSTREAM_REJECTED", `The provider rejected the message: ${m.error_title ?? m.error_code ?? "rejected"}`);
}
