/**
 * Shapes of the provider's webhook bodies (contract section 4) and the
 * builders the simulator uses. Kept apart from the server so the e2e tests
 * and the simulator agree on one definition.
 */

export type MessageStatus = "sent" | "delivered" | "read" | "failed";

export interface StatusError {
  code: number;
  title: string;
}

export interface WebhookStatus {
  id: string;
  status: MessageStatus;
  /** Unix seconds, as a string (the provider's format). */
  timestamp: string;
  recipient_id: string;
  biz_opaque_callback_data?: string;
  errors?: StatusError[];
}

export type WebhookInboundMessage =
  | { from: string; id: string; timestamp: string; type: "text"; text: { body: string } }
  | { from: string; id: string; timestamp: string; type: "button"; button: { text: string; payload: string } };

export interface MessagesChangeValue {
  metadata: { phone_number_id: string };
  contacts?: Array<{ profile: { name: string }; wa_id: string }>;
  messages?: WebhookInboundMessage[];
  statuses?: WebhookStatus[];
}

export type TemplateEvent = "APPROVED" | "REJECTED" | "PAUSED" | "DISABLED";

export interface TemplateStatusChangeValue {
  event: TemplateEvent;
  message_template_id: number | string;
  message_template_name: string;
  message_template_language: string;
  reason?: string;
}

export type WebhookChange =
  | { field: "messages"; value: MessagesChangeValue }
  | { field: "message_template_status_update"; value: TemplateStatusChangeValue };

export interface WebhookBody {
  object: "whatsapp_business_account";
  entry: Array<{ id: string; changes: WebhookChange[] }>;
}

/** The error every failing number's message ends with. */
export const UNDELIVERABLE: StatusError = { code: 131026, title: "Message undeliverable" };

/** Unix seconds as the provider writes them. */
export const unixSeconds = (ms: number = Date.now()): string => String(Math.floor(ms / 1000));

/** The provider's `wa_id` / `to` form: digits, no `+`. */
export const digits = (phone: string): string => phone.replace(/[^\d]/g, "");

/** One entry per phone number id, each with one `messages` change carrying its statuses. */
export function statusesBody(
  templateAccountId: string,
  items: ReadonlyArray<{ phoneNumberId: string; status: WebhookStatus }>,
): WebhookBody {
  const byPhone = new Map<string, WebhookStatus[]>();
  for (const { phoneNumberId, status } of items) {
    let list = byPhone.get(phoneNumberId);
    if (!list) byPhone.set(phoneNumberId, (list = []));
    list.push(status);
  }
  return {
    object: "whatsapp_business_account",
    entry: [...byPhone].map(([phoneNumberId, statuses]) => ({
      id: templateAccountId,
      changes: [{ field: "messages", value: { metadata: { phone_number_id: phoneNumberId }, statuses } }],
    })),
  };
}
