/**
 * Verification of the platform's outbound webhooks, for receivers (and for our
 * own tests, which receive exactly as an integrator would). Zero dependencies:
 * node:crypto only.
 *
 * Two independent signatures ride on every delivery:
 * - `X-Service-Signature`: lowercase hex HMAC-SHA256 of the raw body bytes,
 *   keyed with the whole secret string (`whsec_…`, UTF-8).
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`):
 *   `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed with the
 *   base64-decoded part of the secret after `whsec_`.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export type RawBody = string | Buffer | Uint8Array;

const SECRET_PREFIX = "whsec_";
const HEX_SHA256 = /^[0-9a-f]{64}$/;

function bytes(body: RawBody): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** `X-Service-Signature` of a body: lowercase hex HMAC-SHA256 keyed with the whole secret string. */
export function signBody(rawBody: RawBody, secret: string): string {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(bytes(rawBody)).digest("hex");
}

/**
 * True when `signatureHeader` is the `X-Service-Signature` of `rawBody` under
 * `secret`. Compute over the raw bytes received, before any JSON parsing.
 * Constant time; a missing, malformed or wrong-length header is false.
 */
export function verifySignature(rawBody: RawBody, signatureHeader: string | string[] | null | undefined, secret: string): boolean {
  if (typeof signatureHeader !== "string" || typeof secret !== "string" || secret.length === 0) return false;
  const given = signatureHeader.trim();
  if (!HEX_SHA256.test(given)) return false;
  const expected = Buffer.from(signBody(rawBody, secret), "hex");
  return timingSafeEqual(expected, Buffer.from(given, "hex"));
}

/** The HMAC key of the Standard Webhooks form: the base64-decoded part after `whsec_`. */
export function standardWebhooksKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return Buffer.from(encoded, "base64");
}

/** `webhook-signature` value for one message: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`. */
export function signStandardWebhook(id: string, timestampSeconds: number | string, rawBody: RawBody, secret: string): string {
  const mac = createHmac("sha256", standardWebhooksKey(secret))
    .update(`${id}.${timestampSeconds}.`, "utf8")
    .update(bytes(rawBody))
    .digest("base64");
  return `v1,${mac}`;
}

export interface StandardWebhookHeaders {
  "webhook-id"?: string | string[] | null;
  "webhook-timestamp"?: string | string[] | null;
  "webhook-signature"?: string | string[] | null;
}

export interface StandardVerifyOptions {
  /** Largest accepted distance between `webhook-timestamp` and now, in seconds (replay protection). Default 300. */
  toleranceSeconds?: number;
  /** Current time in ms (tests). */
  now?: number;
}

function header(headers: Record<string, unknown>, name: string): string | undefined {
  const direct = headers[name] ?? headers[name.toLowerCase()];
  const value = direct ?? Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  if (Array.isArray(value)) return typeof value[0] === "string" ? value[0] : undefined;
  return typeof value === "string" ? value : undefined;
}

/**
 * Standard Webhooks verification: true when one of the space-separated `v1,`
 * signatures of `webhook-signature` matches, and `webhook-timestamp` is
 * within the tolerance of now (so an old captured delivery cannot be replayed).
 * `headers` may be a Node/express headers object (lowercase keys) or any record.
 */
export function verifyStandardWebhook(
  rawBody: RawBody,
  headers: StandardWebhookHeaders | Record<string, unknown>,
  secret: string,
  opts: StandardVerifyOptions = {},
): boolean {
  const h = headers as Record<string, unknown>;
  const id = header(h, "webhook-id");
  const timestamp = header(h, "webhook-timestamp");
  const signatures = header(h, "webhook-signature");
  if (!id || !timestamp || !signatures || typeof secret !== "string" || secret.length === 0) return false;
  if (!/^\d{1,12}$/.test(timestamp)) return false;
  const now = Math.floor((opts.now ?? Date.now()) / 1000);
  if (Math.abs(now - Number(timestamp)) > (opts.toleranceSeconds ?? 300)) return false;
  const expected = Buffer.from(signStandardWebhook(id, timestamp, rawBody, secret).slice(3), "base64");
  let ok = false;
  for (const part of signatures.split(" ")) {
    const [version, sig] = part.split(",", 2);
    if (version !== "v1" || !sig) continue;
    const given = Buffer.from(sig, "base64");
    // Every candidate is compared, so the time taken does not tell which one matched.
    if (given.length === expected.length && timingSafeEqual(given, expected)) ok = true;
  }
  return ok;
}
