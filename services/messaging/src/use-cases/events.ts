import { domainEvent, type OutboxMessage } from "@platform/bus";
import type { InboundExtras } from "@platform/contracts";
import { iso } from "@platform/db";
import type { ConversationRow } from "../db/repositories/conversations.repository";
import type { MessageRow } from "../db/repositories/messages.repository";

export type OutboundEventStatus = "sent" | "delivered" | "read" | "failed";

/** `message.sent` / `.delivered` / `.read` / `.failed` with the contract's data (section 2, "Event data"). */
export function messageStatusEvent(m: MessageRow, status: OutboundEventStatus): OutboxMessage {
  return domainEvent(`message.${status}`, m.organization_id, {
    messageId: m.id,
    conversationId: m.conversation_id,
    contactId: m.contact_id,
    messagingChannelId: m.channel_id,
    phone: m.phone,
    status,
    providerMessageId: m.provider_message_id,
    ...(m.template_job_id ? { templateJobId: m.template_job_id } : {}),
    ...(status === "failed" ? { error: { code: m.error_code ?? "unknown", title: m.error_title ?? "Message failed" } } : {}),
    // Analytics counts a message by its creation time (contract section 2) and must not ask messaging per event.
    createdAt: iso(m.created_at)!,
  });
}

export function conversationEvent(
  c: Pick<ConversationRow, "id" | "organization_id" | "channel_id" | "contact_id" | "phone">,
  type: "conversation.opened" | "conversation.closed"): OutboxMessage {
  return domainEvent(type, c.organization_id, {
    conversationId: c.id,
    contactId: c.contact_id,
    messagingChannelId: c.channel_id,
    phone: c.phone,
  });
}

export function messageReceivedEvent(m: MessageRow, extras: InboundExtras = {}): OutboxMessage {
  return domainEvent("message.received", m.organization_id, {
    messageId: m.id,
    conversationId: m.conversation_id,
    contactId: m.contact_id,
    messagingChannelId: m.channel_id,
    phone: m.phone,
    type: m.type,
    ...(m.text !== null ? { text: m.text } : {}),
    ...(m.button_payload !== null || m.button_text !== null ? { button: { text: m.button_text ?? "", payload: m.button_payload ?? "" } } : {}),
    ...extras,
    providerMessageId: m.provider_message_id ?? "",
    receivedAt: iso(m.provider_timestamp ?? m.created_at)!,
  });
}
