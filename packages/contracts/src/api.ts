/** Schemas of the public `/api/v1` surface (service-spec.md, contract.md section 2). */
import { z } from "zod";
import { Id, Timestamp, page } from "./common";
import { TemplateButtonParameter, TemplateHeaderMedia } from "./messaging";
import { PhoneInput } from "./phone";

export const PingResponse = z
  .object({ ok: z.literal(true), organizationId: Id("org_01jd0000000000000000000000") })
  .meta({ id: "PingResult" });

// --- messages -------------------------------------------------------------

export const SendMessageRequest = z
  .object({
    to: PhoneInput,
    text: z.string().min(1).max(4096),
    messagingChannelId: z.string().min(1).optional().meta({ description: "defaults to the organization's default channel" }),
  })
  .meta({ id: "SendMessageRequest" });
export type SendMessageRequest = z.infer<typeof SendMessageRequest>;

export const MessageResponse = z
  .object({
    id: Id("msg_01jd0000000000000000000000"),
    conversationId: Id("conv_01jd0000000000000000000000"),
    contactId: Id("ct_01jd0000000000000000000000"),
    providerMessageId: z.string().nullable().meta({ description: "null until the provider has confirmed" }),
  })
  .meta({ id: "Message" });
export type MessageResponse = z.infer<typeof MessageResponse>;

/**
 * A stored message, inbound or outbound, as `GET /api/v1/messages/{messageId}` answers it: the full record a webhook
 * summarized over 256 KB leaves out (service-spec.md, Delivery format).
 */
export const MessageRecord = z
  .object({
    id: Id("msg_01jd0000000000000000000000"),
    direction: z.enum(["inbound", "outbound"]),
    type: z.string().meta({ description: "`text`, `template`, or the inbound message's type (`button`, `image`, …)" }),
    status: z.string().meta({ description: "inbound: `received`; outbound: `pending`, `sent`, `delivered`, `read`, `failed`, or `cancelled` (a template job's send stopped before the provider)" }),
    messagingChannelId: z.string(),
    conversationId: z.string(),
    contactId: z.string(),
    phone: z.string(),
    text: z.string().nullable(),
    button: z.object({ text: z.string(), payload: z.string() }).nullable(),
    providerMessageId: z.string().nullable(),
    templateJobId: z.string().nullable(),
    template: z
      .object({
        name: z.string(),
        language: z.string(),
        headerMedia: TemplateHeaderMedia.nullable(),
        bodyParameters: z.array(z.string()),
        buttonParameters: z.array(TemplateButtonParameter),
      })
      .nullable()
      .meta({ description: "a template send: the template and the parameters it was sent with; otherwise null" }),
    error: z.object({ code: z.string(), title: z.string() }).nullable(),
    receivedAt: Timestamp.nullable().meta({ description: "inbound: the provider's timestamp of the message; outbound: null" }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: "MessageRecord" });
export type MessageRecord = z.infer<typeof MessageRecord>;

/** `Idempotency-Key` header of send endpoints. */
export const IdempotencyKey = z.string().min(1).max(255);

// --- conversations --------------------------------------------------------

export const ConversationStatus = z.enum(["open", "closed"]);
export const Conversation = z
  .object({
    id: Id("conv_01jd0000000000000000000000"),
    contactId: z.string(),
    messagingChannelId: z.string(),
    phone: z.string(),
    status: ConversationStatus,
    openedAt: Timestamp,
    closedAt: Timestamp.nullable(),
    lastMessageAt: Timestamp,
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: "Conversation" });
export type Conversation = z.infer<typeof Conversation>;
export const ConversationList = page(Conversation, "ConversationList");

// --- contacts and opt-outs --------------------------------------------------

export const Contact = z
  .object({
    id: Id("ct_01jd0000000000000000000000"),
    phone: z.string().meta({ example: "+15550001111" }),
    isOptedOut: z.boolean().meta({ description: "true when any channel of the organization has an active opt-out for the number" }),
    optedOutChannelIds: z.array(z.string()).meta({ description: "channels with an active opt-out for the number" }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    waId: z.string().optional(),
    name: z.string().optional(),
    email: z.string().optional(),
  })
  .meta({ id: "Contact" });
export type Contact = z.infer<typeof Contact>;
export const ContactList = page(Contact, "ContactList");

export const OptOutRequest = z
  .object({
    action: z.enum(["set", "clear"]).meta({ description: "`set` creates or reactivates; `clear` revokes (idempotent)" }),
    messagingChannelId: z.string().min(1),
    phone: PhoneInput,
    reason: z.string().max(500).optional().meta({ description: "kept when `action` is `set`" }),
  })
  .meta({ id: "OptOutRequest" });
export type OptOutRequest = z.infer<typeof OptOutRequest>;

export const OptOutState = z
  .object({
    active: z.boolean(),
    optOutId: z.string().nullable(),
    revokedAt: Timestamp.nullable(),
  })
  .meta({ id: "OptOutState" });
export type OptOutState = z.infer<typeof OptOutState>;
