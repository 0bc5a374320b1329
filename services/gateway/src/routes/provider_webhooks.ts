import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import express, { type Router } from "express";
import getRawBody from "raw-body";
import { providerBatchDedupable, providerBatchSubject } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import { ApiError, INTERNAL_HEADERS, logFinished, requestIdFor, type Metrics } from "@platform/http";
import { withRequestContext, type Logger, type RequestContext } from "@platform/logging";
import { httpServerSpan } from "@platform/telemetry";
import { sendError } from "./api_front";

export function verifyProviderSignature(rawBody: Buffer, header: string | undefined, appSecret: string): boolean {
  if (!header || !header.startsWith("sha256=")) return false;
  // Exactly as the provider writes it (contract section 4: lowercase hex): anything else is a bad signature.
  const given = Buffer.from(header.slice("sha256=".length), "utf8");
  const expected = Buffer.from(createHmac("sha256", appSecret).update(rawBody).digest("hex"), "utf8");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const PROVIDER_WEBHOOKS = "/provider/webhooks";
/** The contract's limit outside /templates/send, and what the bus stores. */
const BODY_LIMIT = "1mb";
const RECEIVED = { received: true };
const RECEIVED_BODY = JSON.stringify(RECEIVED);
const JSON_TYPE = "application/json; charset=utf-8";

/**
 * The provider's inbound webhooks. A batch is answered 200 only once it is
 * stored in JetStream (the PROVIDER_INBOUND stream: `provider.messages.v1` for
 * inbound messages only, `provider.inbound.v1` for the rest), so nothing acknowledged
 * is ever lost. A batch of messages and statuses has its hash as message id, so a
 * provider retry of it inside the duplicate window is dropped, and the consumers
 * dedupe per provider message id and status beyond it; any other batch (a template's
 * status) is stored every time: the same bytes again are a new change. Bodies are limited to 1 MB
 * (the contract's limit outside /templates/send, and what the bus stores).
 */
export function registerProviderWebhooks(router: Router, deps: { bus: Bus; appSecret: string; verifyToken: string; log: Logger }): void {
  router.get(PROVIDER_WEBHOOKS, (req, res) => {
    const mode = req.query["hub.mode"];
    const token = req.query["hub.verify_token"];
    const challenge = req.query["hub.challenge"];
    if (mode === "subscribe" && typeof token === "string" && token === deps.verifyToken && typeof challenge === "string") {
      res.status(200).type("text/plain").send(challenge);
      return;
    }
    throw new ApiError("FORBIDDEN", "Verification token mismatch");
  });

  // Any other spelling of the path (express matches case-insensitively, with a trailing slash) and bodies with a
  // Content-Encoding (express inflates them before the signature check); the plain POST has its own front.
  router.post(PROVIDER_WEBHOOKS, express.raw({ type: () => true, limit: BODY_LIMIT }), async (req, res) => {
    await storeProviderBatch(deps, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), req.header("x-hub-signature-256"));
    res.status(200).json(RECEIVED);
  });
}

/**
 * Checks the signature of one provider batch and stores it in JetStream; throws the ApiError to answer otherwise.
 */
async function storeProviderBatch(deps: { bus: Bus; appSecret: string; log: Logger }, raw: Buffer, signature: string | undefined): Promise<void> {
  if (!verifyProviderSignature(raw, signature, deps.appSecret)) {
    deps.log.warn({ bytes: raw.length }, "provider webhook with a bad signature refused");
    throw new ApiError("UNAUTHORIZED", "Invalid signature");
  }
  const body = raw.toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new ApiError("INVALID_JSON", "The body is not valid JSON");
  }
  try {
    // Inbound messages only, or anything else (status callbacks first of all): ADR 0010.
    await deps.bus.publish(
      providerBatchSubject(parsed),
      { body, receivedAt: new Date().toISOString() },
      providerBatchDedupable(parsed) ? { msgId: createHash("sha256").update(raw).digest("hex") } : {},
    );
  } catch (err) {
    // Retrying cannot help a batch larger than the bus stores. Escaping grows a 1 MB body past NATS' 1 MB, so the
    // bus stores it gzipped (COMPRESS_WITHIN_BYTES); this is left for a body that even gzip cannot bring under it.
    if ((err as { code?: string }).code === "MAX_PAYLOAD_EXCEEDED") throw new ApiError("PAYLOAD_TOO_LARGE", "The batch is too large");
    deps.log.error({ err: (err as Error).message }, "provider batch not stored");
    throw ApiError.unavailable("The batch could not be stored; retry");
  }
}

/**
 * True for the requests `createProviderFront` answers: `POST /provider/webhooks` spelled exactly so, with no content
 * encoding. Every other request to the path goes to express, as before.
 */
export function isPlainProviderPost(req: IncomingMessage): boolean {
  if (req.method !== "POST") return false;
  const url = req.url ?? "";
  if (!url.startsWith(PROVIDER_WEBHOOKS) || (url.length > PROVIDER_WEBHOOKS.length && url[PROVIDER_WEBHOOKS.length] !== "?")) return false;
  const encoding = req.headers["content-encoding"];
  return encoding === undefined || encoding.trim().toLowerCase() === "identity";
}

/**
 * The provider's batches on node:http rather than express, as `/api/v1` (ADR 0004): the network's heaviest caller
 * (three status callbacks per message sent, plus every inbound message) paid express's router, middleware chain and
 * body-parser for one route. Same answers: the request id, metrics, trace and log line of the express stack, the same
 * body limit and error envelopes (`toApiError`), the request drained before an error is answered.
 */
export function createProviderFront(deps: { bus: Bus; appSecret: string; log: Logger; metrics: Metrics }): (req: IncomingMessage, res: ServerResponse) => void {
  const { log, metrics } = deps;
  return (req, res) => {
    metrics.track("POST", res, () => PROVIDER_WEBHOOKS);
    const requestId = requestIdFor(req.headers[INTERNAL_HEADERS.requestId]);
    res.setHeader("X-Request-Id", requestId);
    const ctx: RequestContext = { requestId, trace: httpServerSpan(req.method, req.headers, res, () => PROVIDER_WEBHOOKS) };
    logFinished(log, req.method, res, () => PROVIDER_WEBHOOKS, ctx);
    withRequestContext(ctx, async () => {
      let raw: Buffer;
      try {
        raw = await getRawBody(req, { limit: BODY_LIMIT, length: req.headers["content-length"] });
      } catch (err) {
        // Read the rest off before answering, as body-parser does, so the caller sees the answer, not a reset.
        await drained(req);
        throw err;
      }
      const signature = req.headers["x-hub-signature-256"];
      await storeProviderBatch(deps, raw, Array.isArray(signature) ? signature[0] : signature);
      res.writeHead(200, { "Content-Type": JSON_TYPE, "Content-Length": Buffer.byteLength(RECEIVED_BODY) });
      res.end(RECEIVED_BODY);
    }).catch((err: unknown) => sendError(res, err, log, PROVIDER_WEBHOOKS));
  };
}

function drained(req: IncomingMessage): Promise<void> {
  if (req.complete || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    req.once("end", resolve);
    req.once("close", resolve);
    req.resume();
  });
}
