/**
 * The bytes a webhook receives. They are serialized once per event and stored,
 * so every retry sends the same bytes (same signature input, same `data.id`).
 */
import { WEBHOOK_HEADERS as H, WEBHOOK_MAX_PAYLOAD_BYTES, WEBHOOK_SUMMARY_FIELD_BYTES, WEBHOOK_USER_AGENT, type DomainEvent } from "@platform/contracts";
import { signBody, signStandardWebhook } from "@platform/webhook-verify";

/** Bodies over this many bytes are summarized (service-spec Limits: 256 KB). */
export const MAX_PAYLOAD_BYTES = WEBHOOK_MAX_PAYLOAD_BYTES;

type Envelope = Pick<DomainEvent, "event" | "timestamp" | "organizationId"> & { data: { id: string } & Record<string, unknown> };

/**
 * `{event, timestamp, organizationId, data}`; over the limit, `data` keeps its id, every field that is small, and
 * says which it left out (`omitted`) with `summarized: true`, so the receiver fetches the full record through the API
 * by id. Never cut mid-JSON.
 */
export function serializeEvent(e: Envelope): string {
  const body = JSON.stringify({ event: e.event, timestamp: e.timestamp, organizationId: e.organizationId, data: e.data });
  if (Buffer.byteLength(body, "utf8") <= MAX_PAYLOAD_BYTES) return body;
  return JSON.stringify({ event: e.event, timestamp: e.timestamp, organizationId: e.organizationId, data: summarize(e.data) });
}

/** The fields of at most WEBHOOK_SUMMARY_FIELD_BYTES of JSON each, whole; the names of the others in `omitted`. */
export function summarize(data: { id: string } & Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { id: data.id };
  const omitted: string[] = [];
  for (const [key, value] of Object.entries(data)) {
    if (key === "id" || value === undefined) continue;
    if (Buffer.byteLength(JSON.stringify(value), "utf8") <= WEBHOOK_SUMMARY_FIELD_BYTES) out[key] = value;
    else omitted.push(key);
  }
  out.summarized = true;
  out.omitted = omitted;
  return out;
}

/** Every header of one attempt, both signatures included. */
export function deliveryHeaders(args: { body: string | Buffer; secret: string; event: string; eventId: string; deliveryId: string; now?: Date }): Record<string, string> {
  const timestamp = Math.floor((args.now ?? new Date()).getTime() / 1000);
  return {
    "content-type": "application/json",
    "user-agent": WEBHOOK_USER_AGENT,
    [H.signature]: signBody(args.body, args.secret),
    [H.event]: args.event,
    [H.delivery]: args.deliveryId,
    [H.id]: args.eventId,
    [H.timestamp]: String(timestamp),
    [H.standardSignature]: signStandardWebhook(args.eventId, timestamp, args.body, args.secret),
  };
}
