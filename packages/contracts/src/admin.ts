/** Schemas of the admin API (contract.md section 3): the application's Settings screens. */
import { z } from "zod";
import { Timestamp } from "./common";
import { PhoneInput } from "./phone";
import { SubscribableEventType } from "./events";

export const Plan = z.enum(["growth", "starter", "inactive"]);
export type Plan = z.infer<typeof Plan>;

export const RateLimit = z.object({
  perSecond: z.number().int().min(1).max(1_000_000),
  burst: z.number().int().min(1).max(10_000_000),
});
export type RateLimit = z.infer<typeof RateLimit>;

export const DEFAULT_OPT_OUT_KEYWORDS = ["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT"];
const Keywords = z.array(z.string().trim().min(1).max(64)).max(200);

export const CreateOrganizationRequest = z.object({
  name: z.string().trim().min(1).max(200),
  plan: Plan.default("growth"),
  rateLimit: RateLimit.optional(),
  optOutKeywords: Keywords.optional(),
});
export const UpdateOrganizationRequest = z
  .object({
    name: z.string().trim().min(1).max(200),
    plan: Plan,
    rateLimit: RateLimit.nullable().meta({ description: "null goes back to the platform default" }),
    optOutKeywords: Keywords.nullable().meta({ description: "null goes back to the default list" }),
  })
  .partial();
export const Organization = z.object({
  id: z.string(),
  name: z.string(),
  plan: Plan,
  rateLimit: RateLimit,
  optOutKeywords: z.array(z.string()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type Organization = z.infer<typeof Organization>;

export const CreateChannelRequest = z.object({
  name: z.string().trim().min(1).max(200),
  phoneNumber: PhoneInput,
  providerPhoneNumberId: z.string().trim().min(1).max(64),
  connected: z.boolean().default(true),
  isDefault: z.boolean().optional(),
  messagesPerSecond: z.number().int().min(1).max(1000).default(80),
});
export const UpdateChannelRequest = z
  .object({
    name: z.string().trim().min(1).max(200),
    connected: z.boolean(),
    isDefault: z.boolean(),
    messagesPerSecond: z.number().int().min(1).max(1000),
  })
  .partial();
export const Channel = z.object({
  id: z.string(),
  name: z.string(),
  phoneNumber: z.string(),
  providerPhoneNumberId: z.string(),
  connected: z.boolean(),
  isDefault: z.boolean(),
  messagesPerSecond: z.number().int(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type Channel = z.infer<typeof Channel>;

export const CreateApiKeyRequest = z.object({ name: z.string().trim().min(1).max(200) });
export const CreatedApiKey = z.object({ id: z.string(), name: z.string(), key: z.string(), createdAt: Timestamp });
export const ApiKeySummary = z.object({
  id: z.string(),
  name: z.string(),
  keyPrefix: z.string(),
  createdAt: Timestamp,
  lastUsedAt: Timestamp.nullable(),
  revokedAt: Timestamp.nullable(),
});

export const ManualOptOutRequest = z.object({
  messagingChannelId: z.string().min(1),
  phone: PhoneInput,
  reason: z.string().max(500).optional(),
});

/** `GET /admin/v1/organizations/{orgId}/opt-outs?phone=` (the console's look-up, issue 15). */
export const OptOutLookupQuery = z.object({ phone: PhoneInput });
/** The phone's opt-out record on one channel (one record per channel and phone, revoked and reactivated in place). */
export const OptOutEntry = z.object({
  optOutId: z.string(),
  messagingChannelId: z.string(),
  phone: z.string(),
  active: z.boolean(),
  source: z.enum(["keyword", "api", "manual"]),
  keyword: z.string().nullable(),
  reason: z.string().nullable(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  revokedAt: Timestamp.nullable(),
});
export type OptOutEntry = z.infer<typeof OptOutEntry>;
/** Every channel's record for the phone (active first, then by channel); empty when the number never opted out. */
export const OptOutLookup = z.object({ phone: z.string(), items: z.array(OptOutEntry) });
export type OptOutLookup = z.infer<typeof OptOutLookup>;

/**
 * A webhook's URL as it will be called: surrounding whitespace trimmed; spaces or control characters inside refused
 * (a URL parser drops tabs and newlines silently, so the stored URL would not be the one called).
 */
const WebhookUrl = z
  .string()
  .trim()
  .min(1)
  .max(2048)
  .regex(/^[^\s\u0000-\u001f\u007f]+$/, { message: "must not contain spaces or control characters" });

export const CreateWebhookRequest = z.object({
  url: WebhookUrl,
  events: z.array(SubscribableEventType).min(1),
});
export const UpdateWebhookRequest = z
  .object({ url: WebhookUrl, events: z.array(SubscribableEventType).min(1), active: z.boolean() })
  .partial();
export const Webhook = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(SubscribableEventType),
  active: z.boolean(),
  consecutiveFailures: z.number().int(),
  deactivatedAt: Timestamp.nullable(),
  createdAt: Timestamp,
});
export const CreatedWebhook = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(SubscribableEventType),
  active: z.boolean(),
  secret: z.string(),
  createdAt: Timestamp,
});
export const WebhookTestResult = z.object({
  delivered: z.boolean(),
  responseStatus: z.number().int().nullable(),
  durationMs: z.number().int(),
});
export const WebhookDelivery = z.object({
  id: z.string(),
  eventId: z.string(),
  event: z.string(),
  attempt: z.number().int(),
  createdAt: Timestamp,
  responseStatus: z.number().int().nullable(),
  responseBody: z.string().nullable(),
  error: z.string().nullable(),
  durationMs: z.number().int().nullable(),
});
