/**
 * Domain events: what webhooks deliver and what travels on the EVENTS stream.
 * The bus payload IS the webhook body `{event, timestamp, organizationId, data}`;
 * `data.id` is the event's unique id (the JetStream `Nats-Msg-Id`, and the
 * receivers' idempotency key).
 */
import { z } from "zod";

export const EventType = z.enum([
  "message.received",
  "message.sent",
  "message.delivered",
  "message.read",
  "message.failed",
  "conversation.opened",
  "conversation.closed",
  "optout.created",
  "template.status_updated",
  "webhook.test",
]);
export type EventType = z.infer<typeof EventType>;

/** Every type a webhook may subscribe to (`webhook.test` is never subscribed to). */
export const SubscribableEventType = EventType.exclude(["webhook.test"]);
export type SubscribableEventType = z.infer<typeof SubscribableEventType>;

export const OutboundStatus = z.enum(["pending", "sent", "delivered", "read", "failed"]);
export type OutboundStatus = z.infer<typeof OutboundStatus>;

const base = { id: z.string() };

export const MessageReceivedData = z.object({
  ...base,
  messageId: z.string(),
  conversationId: z.string(),
  contactId: z.string(),
  messagingChannelId: z.string(),
  phone: z.string(),
  type: z.string(),
  text: z.string().optional(),
  button: z.object({ text: z.string(), payload: z.string() }).optional(),
  /** `image`, `video`, `audio`, `document` and `sticker` messages: the provider's media id (to fetch the file from the provider), its type and caption. */
  media: z.object({ id: z.string(), mimeType: z.string().optional(), sha256: z.string().optional(), caption: z.string().optional(), fileName: z.string().optional() }).optional(),
  /** `location` messages. */
  location: z.object({ latitude: z.number(), longitude: z.number(), name: z.string().optional(), address: z.string().optional() }).optional(),
  /** An interactive message's list reply: the chosen row. */
  listReply: z.object({ id: z.string(), title: z.string(), description: z.string().optional() }).optional(),
  /** `reaction` messages: the provider id of the message reacted to, and the emoji (empty when a reaction is removed). */
  reaction: z.object({ providerMessageId: z.string(), emoji: z.string() }).optional(),
  providerMessageId: z.string(),
  receivedAt: z.string(),
});
export type MessageReceivedData = z.infer<typeof MessageReceivedData>;
/** What `message.received` carries beyond the text and the button reply (read from the provider's message). */
export type InboundExtras = Pick<MessageReceivedData, "media" | "location" | "listReply" | "reaction">;

export const MessageStatusData = z.object({
  ...base,
  messageId: z.string(),
  conversationId: z.string(),
  contactId: z.string(),
  messagingChannelId: z.string(),
  phone: z.string(),
  status: OutboundStatus,
  providerMessageId: z.string().nullable(),
  templateJobId: z.string().optional(),
  error: z.object({ code: z.string(), title: z.string() }).optional(),
  /** When the message was created (ISO 8601, milliseconds): what analytics counts it by, without asking messaging. */
  createdAt: z.string(),
});

export const ConversationData = z.object({
  ...base,
  conversationId: z.string(),
  contactId: z.string(),
  messagingChannelId: z.string(),
  phone: z.string(),
});

export const OptOutCreatedData = z.object({
  ...base,
  optOutId: z.string(),
  messagingChannelId: z.string(),
  phone: z.string(),
  contactId: z.string().nullable(),
  source: z.enum(["keyword", "api", "manual"]),
  keyword: z.string().optional(),
  reason: z.string().nullable(),
});

export const TemplateStatusData = z.object({
  ...base,
  templateId: z.string(),
  providerTemplateId: z.string(),
  name: z.string(),
  language: z.string(),
  status: z.string(),
  previousStatus: z.string().nullable(),
  reason: z.string().nullable(),
});

export const WebhookTestData = z.object({ ...base, webhookId: z.string() });

export const EVENT_DATA = {
  "message.received": MessageReceivedData,
  "message.sent": MessageStatusData,
  "message.delivered": MessageStatusData,
  "message.read": MessageStatusData,
  "message.failed": MessageStatusData,
  "conversation.opened": ConversationData,
  "conversation.closed": ConversationData,
  "optout.created": OptOutCreatedData,
  "template.status_updated": TemplateStatusData,
  "webhook.test": WebhookTestData,
} as const satisfies Record<EventType, z.ZodType>;

export type EventData<T extends EventType> = z.infer<(typeof EVENT_DATA)[T]>;

/** The envelope of a domain event, on the bus and in the webhook body alike. */
export const DomainEvent = z.object({
  event: EventType,
  timestamp: z.string(),
  organizationId: z.string(),
  data: z.object({ id: z.string() }).passthrough(),
});
export type DomainEvent<T extends EventType = EventType> = {
  event: T;
  timestamp: string;
  organizationId: string;
  data: EventData<T>;
};

/** Parses an envelope and its event-specific data; throws a ZodError when either is off. */
export function parseDomainEvent(raw: unknown): DomainEvent {
  const env = DomainEvent.parse(raw);
  const data = EVENT_DATA[env.event].parse(env.data);
  return { ...env, data } as DomainEvent;
}
