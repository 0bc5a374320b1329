/**
 * Outbound webhooks (service-spec "Events", contract section 2): the fixed
 * numbers, the header names and the list answers of the admin API. The body
 * itself is the DomainEvent envelope (events.ts).
 */
import { z } from "zod";
import { page } from "./common";
import { Webhook, WebhookDelivery } from "./admin";

export const WEBHOOK_USER_AGENT = "Service-Webhooks/1";

/** Header names as sent (lowercase; HTTP header names are case-insensitive). */
export const WEBHOOK_HEADERS = {
  /** Lowercase hex HMAC-SHA256 of the raw body, keyed with the whole `whsec_…` secret. */
  signature: "x-service-signature",
  event: "x-service-event",
  /** The attempt id (`dlv_…`), also the id of the attempt log row. */
  delivery: "x-service-delivery",
  /** Standard Webhooks: `webhook-id` = `data.id`. */
  id: "webhook-id",
  /** Standard Webhooks: Unix seconds of the attempt. */
  timestamp: "webhook-timestamp",
  /** Standard Webhooks: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed with the base64-decoded secret. */
  standardSignature: "webhook-signature",
} as const;

/** Bodies over this many bytes are summarized (the receiver fetches the record by id). */
export const WEBHOOK_MAX_PAYLOAD_BYTES = 256 * 1024;
/** Characters of a response body kept in the attempt log. */
export const WEBHOOK_RESPONSE_BODY_LIMIT = 1024;
/** Attempts after the first one. */
export const WEBHOOK_MAX_RETRIES = 3;
/** Consecutive failed attempts that deactivate a webhook. */
export const WEBHOOK_DEACTIVATE_AFTER_FAILURES = 10;

/** Fields of `data` a summarized delivery keeps whole: each at most this many bytes of JSON. */
export const WEBHOOK_SUMMARY_FIELD_BYTES = 1024;

/**
 * `data` of a summarized delivery: the event id, every field of the event that is small (ids, phone, type, status,
 * timestamps…), `summarized: true`, and `omitted`, the names of the fields left out (fetch the record by its id:
 * `GET /api/v1/messages/{messageId}` for a message).
 */
export const SummarizedEventData = z
  .object({ id: z.string(), summarized: z.literal(true), omitted: z.array(z.string()).min(1) })
  .catchall(z.unknown());

export const WebhookList = page(Webhook, "WebhookList");
export const WebhookDeliveryList = page(WebhookDelivery, "WebhookDeliveryList");
