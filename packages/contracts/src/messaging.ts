/**
 * Bus payloads owned by the messaging service: the provider's webhook body
 * (Graph API shape, contract section 4) as messaging reads it from
 * `provider.inbound.v1`, and messaging's own durable send-retry work item.
 */
import { z } from "zod";

/** One inbound message of a `messages` change; unknown types (media, interactive) keep their `type`. */
export const ProviderInboundMessage = z
  .object({
    from: z.string().min(1),
    id: z.string().min(1),
    timestamp: z.union([z.string(), z.number()]),
    type: z.string().min(1),
    text: z.object({ body: z.string() }).optional(),
    button: z.object({ text: z.string(), payload: z.string() }).optional(),
  })
  .passthrough();
export type ProviderInboundMessage = z.infer<typeof ProviderInboundMessage>;

export const ProviderStatus = z
  .object({
    id: z.string().min(1),
    status: z.string().min(1),
    timestamp: z.union([z.string(), z.number()]).optional(),
    recipient_id: z.string().optional(),
    biz_opaque_callback_data: z.string().optional(),
    errors: z
      .array(z.object({ code: z.union([z.number(), z.string()]), title: z.string().optional(), message: z.string().optional() }).passthrough())
      .optional(),
  })
  .passthrough();
export type ProviderStatus = z.infer<typeof ProviderStatus>;

export const ProviderMessagesValue = z
  .object({
    metadata: z.object({ phone_number_id: z.string().min(1) }).passthrough(),
    contacts: z.array(z.object({ profile: z.object({ name: z.string() }).partial().optional(), wa_id: z.string() }).passthrough()).optional(),
    messages: z.array(ProviderInboundMessage).optional(),
    statuses: z.array(ProviderStatus).optional(),
  })
  .passthrough();
export type ProviderMessagesValue = z.infer<typeof ProviderMessagesValue>;

/** The whole webhook body; changes other than `messages` (template status updates) are kept raw. */
export const ProviderWebhookBody = z
  .object({
    object: z.string().optional(),
    entry: z.array(
      z
        .object({
          id: z.string().optional(),
          changes: z.array(z.object({ field: z.string(), value: z.unknown() }).passthrough()).default([]),
        })
        .passthrough(),
    ),
  })
  .passthrough();
export type ProviderWebhookBody = z.infer<typeof ProviderWebhookBody>;

/** Durable work item: (re)send one stored outbound message. Its msgId is `send:<messageId>:<attempt>`. */
export const MessageSendWork = z.object({ messageId: z.string(), organizationId: z.string() });
export type MessageSendWork = z.infer<typeof MessageSendWork>;

export const MESSAGING_SUBJECTS = {
  /** On STREAMS.work. */
  sendWork: { subject: "work.messaging.send.v1", schema: MessageSendWork },
  /** Core NATS broadcast: every messaging replica drops its cached channels of the organization. */
  channelsChanged: { subject: "bcast.messaging.channels.changed.v1", schema: z.object({ organizationId: z.string() }) },
} as const;
