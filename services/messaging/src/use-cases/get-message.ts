import type { MessageRecord } from "@platform/contracts";
import { iso } from "@platform/db";
import { ApiError } from "@platform/http";
import type { MessagingContext } from "../context";
import { messagesRepository, type MessageRow } from "../db/repositories/messages.repository";

/** The organization's message by id; another organization's, or none: NOT_FOUND. */
export async function getMessage(ctx: MessagingContext, organizationId: string, messageId: string): Promise<MessageRecord> {
  const [row] = await messagesRepository.findByIds(ctx.db, organizationId, [messageId]);
  if (!row) throw new ApiError("NOT_FOUND", "Message not found");
  return toMessageRecord(row);
}

export function toMessageRecord(m: MessageRow): MessageRecord {
  const inbound = m.direction === "inbound";
  return {
    id: m.id,
    direction: m.direction,
    type: m.type,
    status: m.status,
    messagingChannelId: m.channel_id,
    conversationId: m.conversation_id,
    contactId: m.contact_id,
    phone: m.phone,
    text: m.text,
    button: m.button_text !== null || m.button_payload !== null ? { text: m.button_text ?? "", payload: m.button_payload ?? "" } : null,
    providerMessageId: m.provider_message_id,
    templateJobId: m.template_job_id,
    template: m.template_payload && {
      name: m.template_payload.template.name,
      language: m.template_payload.template.language,
      headerMedia: m.template_payload.headerMedia,
      bodyParameters: m.template_payload.bodyParameters,
      buttonParameters: m.template_payload.buttonParameters,
    },
    error: m.error_code !== null ? { code: m.error_code, title: m.error_title ?? "" } : null,
    // As message.received has it: the provider's timestamp, else when it was stored.
    receivedAt: inbound ? iso(m.provider_timestamp ?? m.created_at) : null,
    createdAt: iso(m.created_at)!,
    updatedAt: iso(m.updated_at)!,
  };
}
