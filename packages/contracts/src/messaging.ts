/**
 * Bus payloads owned by the messaging service: the provider's webhook body
 * (Graph API shape, contract section 4) as messaging reads it from
 * `provider.inbound.v1`, and messaging's own durable send-retry work item.
 */
import { z } from "zod";

/**
 * The longest provider message id messaging stores (the network's are about 60 characters). Longer ones cannot be an
 * index key nor a keyword opt-out's key (contacts' `resolve-many`): such a message is skipped with a warning, the rest
 * of its batch handled.
 */
export const PROVIDER_MESSAGE_ID_MAX_LENGTH = 512;

/**
 * Provider batches are read item by item (each entry, change, contact, message and status on its own): the gateway
 * has answered 200 before anyone reads them and the provider never sends them again, so an item messaging cannot read
 * is skipped alone and never takes the readable items beside it down with it. Fields messaging does not need are not
 * checked (`entry[].id`, a status' `recipient_id`); a field it can do without, of an unexpected type, counts as absent
 * (`.catch(undefined)`).
 */

/** One inbound message of a `messages` change; unknown types (media, interactive) keep their `type`. */
export const ProviderInboundMessage = z
  .object({
    from: z.string().min(1),
    id: z.string().min(1),
    /** Unix seconds; absent or unreadable: the time the batch was received. */
    timestamp: z.union([z.string(), z.number()]).optional().catch(undefined),
    type: z.string().min(1),
    /** Read only for `type: "text"`, where it is required. */
    text: z.object({ body: z.string() }).passthrough().optional().catch(undefined),
    /** Read only for `type: "button"`, where it is required. */
    button: z.object({ text: z.string(), payload: z.string() }).passthrough().optional().catch(undefined),
  })
  .passthrough()
  .superRefine((m, issues) => {
    // A text without its text, a button reply without its button: nothing to store, nothing a keyword opt-out could read.
    if (m.type === "text" && !m.text) issues.addIssue({ code: "custom", path: ["text"], message: "a text message needs text.body" });
    if (m.type === "button" && !m.button) issues.addIssue({ code: "custom", path: ["button"], message: "a button message needs button.text and button.payload" });
  });
export type ProviderInboundMessage = z.infer<typeof ProviderInboundMessage>;

export const ProviderStatus = z
  .object({
    id: z.string().min(1),
    status: z.string().min(1),
    timestamp: z.union([z.string(), z.number()]).optional().catch(undefined),
    recipient_id: z.string().optional().catch(undefined),
    /** Our message id, echoed; unreadable: the status names its message by the provider's id alone. */
    biz_opaque_callback_data: z.string().optional().catch(undefined),
    /** Unreadable: a `failed` status without its reason (code `unknown`). */
    errors: z
      .array(z.object({ code: z.union([z.number(), z.string()]), title: z.string().optional(), message: z.string().optional() }).passthrough())
      .optional()
      .catch(undefined),
  })
  .passthrough();
export type ProviderStatus = z.infer<typeof ProviderStatus>;

/** One sender's profile of a `messages` change (for the contact's name). */
export const ProviderContact = z
  .object({
    profile: z.object({ name: z.string().optional().catch(undefined) }).passthrough().optional().catch(undefined),
    wa_id: z.string(),
  })
  .passthrough();
export type ProviderContact = z.infer<typeof ProviderContact>;

/** A `messages` change's value, its items read: what messaging handles. */
export const ProviderMessagesValue = z
  .object({
    metadata: z.object({ phone_number_id: z.string().min(1) }).passthrough(),
    contacts: z.array(ProviderContact).optional(),
    messages: z.array(ProviderInboundMessage).optional(),
    statuses: z.array(ProviderStatus).optional(),
  })
  .passthrough();
export type ProviderMessagesValue = z.infer<typeof ProviderMessagesValue>;

/** A `messages` change's value with its lists unread: each item is then read on its own (`ProviderContact`, ...). */
export const ProviderMessagesChangeValue = z
  .object({
    metadata: z.object({ phone_number_id: z.string().min(1) }).passthrough(),
    contacts: z.unknown().optional(),
    messages: z.unknown().optional(),
    statuses: z.unknown().optional(),
  })
  .passthrough();
export type ProviderMessagesChangeValue = z.infer<typeof ProviderMessagesChangeValue>;

/** A provider webhook body as messaging and template-jobs read it: its entries, each then read on its own (`ProviderWebhookEntry`). */
export const ProviderWebhookEntries = z.object({ entry: z.array(z.unknown()) }).passthrough();

/**
 * A provider batch's JSON, with any NUL character in its strings replaced by U+FFFD: the network may carry NUL in a
 * text, a name, a payload or a template's rejection reason, Postgres can store none, and a batch that can never be
 * stored would otherwise be redelivered until it reached the dead-letter stream. (Raw NUL bytes are not valid JSON;
 * only the escape `\u0000` can carry one.)
 */
export function parseProviderJson(rawBody: string): unknown {
  if (!rawBody.includes("\\u0000")) return JSON.parse(rawBody);
  return JSON.parse(rawBody, (_key, value: unknown) => (typeof value === "string" && value.includes("\0") ? value.replaceAll("\0", "\uFFFD") : value));
}
/**
 * One entry: its changes, each then read on its own (`ProviderWebhookChange`), and its id, the template account
 * (template-jobs'; a number is read as its digits, anything else as absent).
 */
export const ProviderWebhookEntry = z
  .object({
    id: z.union([z.string(), z.number().transform(String)]).optional().catch(undefined),
    changes: z.array(z.unknown()).optional(),
  })
  .passthrough();
export const ProviderWebhookChange = z.object({ field: z.string(), value: z.unknown() }).passthrough();

/**
 * `message.failed`'s `error.code` for an accepted send stopped by an opt-out set while it waited (for its pacing slot,
 * its retry): never sent. A template job counts such a recipient `skipped`, as one opted out before it was sent.
 */
export const OPTED_OUT_FAILURE_CODE = "contact_opted_out";

/** Durable work item: (re)send one stored outbound message. Its msgId is `send:<messageId>:<attempt>`. */
export const MessageSendWork = z.object({ messageId: z.string(), organizationId: z.string() });
export type MessageSendWork = z.infer<typeof MessageSendWork>;

/**
 * An outbound message the provider has not accepted at its first attempt: stored, answered with `providerMessageId:
 * null`, retried in the background. Not a public event (the spec's message statuses start at `sent`); analytics counts
 * the message from here on, as `pending`, until its first status event moves it (contract: analytics counts outbound
 * messages by their `createdAt`, each by its current status).
 */
export const MessagePending = z.object({ organizationId: z.string(), messageId: z.string(), createdAt: z.string() });
export type MessagePending = z.infer<typeof MessagePending>;

/**
 * A template send its job's cancel ended before it reached the provider (status `cancelled`, ADR 0018, third
 * addendum): never sent, so no public event (`message.failed` is the provider's failure). Analytics counts the message
 * as `cancelled` from here on, a final status. Same fields as `MessagePending`.
 */
export const MessageCancelled = MessagePending;
export type MessageCancelled = MessagePending;

export const MESSAGING_SUBJECTS = {
  /** On STREAMS.work. */
  sendWork: { subject: "work.messaging.send.v1", schema: MessageSendWork },
  /** On STREAMS.system, msgId `pending:<messageId>`: written with the first attempt's transient outcome. */
  messagePending: { subject: "sys.message.pending.v1", schema: MessagePending },
  /** On STREAMS.system, msgId `cancelled:<messageId>`: written with the `cancelled` status, in its transaction. */
  messageCancelled: { subject: "sys.message.cancelled.v1", schema: MessageCancelled },
  /** Core NATS broadcast: every messaging replica drops its cached channels of the organization. */
  channelsChanged: { subject: "bcast.messaging.channels.changed.v1", schema: z.object({ organizationId: z.string() }) },
} as const;

// --- template sends (asked by template-jobs, answered by messaging) ---------

/** A button variable of a template send (contract section 4). */
export const TemplateButtonParameter = z.discriminatedUnion("type", [
  z.object({ type: z.literal("quick_reply"), payload: z.string().min(1).max(1024), index: z.number().int().min(0).max(9).optional() }),
  z.object({ type: z.literal("url"), text: z.string().min(1).max(1024), index: z.number().int().min(0).max(9).optional() }),
]);
export type TemplateButtonParameter = z.infer<typeof TemplateButtonParameter>;

export const TemplateHeaderFormat = z.enum(["image", "video", "document"]);

/** The media of a template's header, as a job gives it (its URL already checked there). */
export const TemplateHeaderMedia = z.object({ url: z.string().min(1).max(4000), fileName: z.string().min(1).max(240).optional() });

/**
 * One template message to send. `key` is the send's idempotency key
 * (`job:<jobId>:<recipientId>`): messaging stores at most one message per
 * (organization, key), so a repeat after a crash answers the existing
 * message and never calls the provider again.
 */
export const TemplateSendItem = z.object({
  key: z.string().min(1).max(255),
  /** E.164 (template-jobs normalized it at creation). */
  phone: z.string().regex(/^\+[1-9]\d{1,14}$/),
  bodyParameters: z.array(z.string().min(1).max(1024)).max(20).default([]),
  buttonParameters: z.array(TemplateButtonParameter).max(10).default([]),
});
export type TemplateSendItem = z.infer<typeof TemplateSendItem>;

/**
 * Sends a batch of one job's template messages on one channel: each is
 * checked against opt-outs (read-your-writes), stored as a message of the
 * messaging service (contact, conversation, `message.*` events with
 * `templateJobId`), paced with the channel's other sends (bulk sends yield to
 * single sends, docs/adr/0003-channel-pacing.md) and handed to the provider.
 */
export const TemplateSendRequest = z.object({
  organizationId: z.string(),
  messagingChannelId: z.string(),
  templateJobId: z.string(),
  template: z.object({ name: z.string().min(1), language: z.string().min(1), headerFormat: TemplateHeaderFormat.nullable().default(null) }),
  headerMedia: TemplateHeaderMedia.nullable().default(null),
  sends: z.array(TemplateSendItem).min(1).max(1_000),
  /** When the job's run asked (epoch ms): a stop of the job broadcast after it holds the batch's sends not made yet. */
  issuedAt: z.number().optional(),
  /** A throttled job's interval (3,600,000 / throttlePerHour ms): its provider calls are at least this far apart. */
  minIntervalMs: z.number().positive().max(3_600_000).optional(),
});
export type TemplateSendRequest = z.infer<typeof TemplateSendRequest>;

/**
 * The outcome of one send, in the order of `sends`:
 * - `sent`: the provider accepted it (`providerMessageId` set);
 * - `pending`: stored; the provider failed transiently and messaging retries
 *   it in the background; the final outcome arrives as `message.sent` or
 *   `message.failed` with `templateJobId` and this `messageId`;
 * - `failed`: the provider refused it permanently (stored as `failed`);
 * - `opted_out`: the number has an active opt-out on the channel; nothing
 *   stored, nothing sent;
 * - `cancelled`: stored, never sent: the job was cancelled before its send
 *   reached the provider (status `cancelled`, no event).
 * A repeated key answers the stored message's current outcome.
 */
export const TemplateSendOutcome = z.object({
  key: z.string(),
  outcome: z.enum(["sent", "pending", "failed", "opted_out", "cancelled"]),
  messageId: z.string().nullable(),
  providerMessageId: z.string().nullable(),
  error: z.object({ code: z.string(), title: z.string() }).optional(),
});
export type TemplateSendOutcome = z.infer<typeof TemplateSendOutcome>;
export const TemplateSendResponse = z.object({ results: z.array(TemplateSendOutcome) });
export type TemplateSendResponse = z.infer<typeof TemplateSendResponse>;

/**
 * The stored outcome of template sends by key, sending nothing: a key messaging never stored is absent from the
 * answer. template-jobs settles with it the recipients a dead run left `sending` in a job cancelled since.
 */
export const TemplateLookupRequest = z.object({ organizationId: z.string(), keys: z.array(z.string()).min(1).max(1_000) });
export type TemplateLookupRequest = z.infer<typeof TemplateLookupRequest>;

/**
 * `rpc.messaging.template.stop.v1` (asked by template-jobs once a cancelled job's run has stopped): the job's sends
 * messaging still holds (`pending`: retrying after a transient failure, or held back when the job stopped) end as
 * `cancelled` (never sent: no public event); an attempt running now is waited for. Answers the outcome of each of
 * `messageIds`, so the cancel's answer is final.
 */
export const TemplateStopRequest = z.object({
  organizationId: z.string(),
  templateJobId: z.string(),
  /** The job's sends whose outcome the caller waits for (its `waiting` recipients): answered whatever ended them. */
  messageIds: z.array(z.string()).max(1_000),
  /** How the job ended: its sends end `cancelled` with `job_cancelled` (its cancel) or `job_failed` (its template's disabling). */
  jobStatus: z.enum(["cancelled", "failed"]).default("cancelled"),
});
export type TemplateStopRequest = z.infer<typeof TemplateStopRequest>;
export const TemplateStopResponse = z.object({
  results: z.array(z.object({ messageId: z.string(), outcome: z.enum(["sent", "failed", "pending", "cancelled"]), errorCode: z.string().nullable() })),
});
export type TemplateStopResponse = z.infer<typeof TemplateStopResponse>;
/** The error code kept on a template send its job's cancel ended before it was sent (status `cancelled`). */
export const JOB_CANCELLED_FAILURE_CODE = "job_cancelled";

export const MESSAGING_RPC = {
  sendTemplates: {
    subject: "rpc.messaging.template.send.v1",
    request: TemplateSendRequest,
    response: TemplateSendResponse,
  },
  lookupTemplateSends: {
    subject: "rpc.messaging.template.lookup.v1",
    request: TemplateLookupRequest,
    response: TemplateSendResponse,
  },
  stopTemplateSends: {
    subject: "rpc.messaging.template.stop.v1",
    request: TemplateStopRequest,
    response: TemplateStopResponse,
  },
} as const;
