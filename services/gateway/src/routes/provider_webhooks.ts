import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import express, { type Router } from "express";
import { providerBatchSubject } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import { ApiError } from "@platform/http";
import type { Logger } from "@platform/logging";

export function verifyProviderSignature(rawBody: Buffer, header: string | undefined, appSecret: string): boolean {
  if (!header || !header.startsWith("sha256=")) return false;
  const given = Buffer.from(header.slice("sha256=".length).trim().toLowerCase(), "utf8");
  const expected = Buffer.from(createHmac("sha256", appSecret).update(rawBody).digest("hex"), "utf8");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * The provider's inbound webhooks. A batch is answered 200 only once it is
 * stored in JetStream (the PROVIDER_INBOUND stream: `provider.messages.v1` for
 * inbound messages only, `provider.inbound.v1` for the rest), so nothing acknowledged
 * is ever lost; its hash is the message id, so a provider retry of the same
 * batch inside the duplicate window is dropped, and the consumers dedupe
 * per provider message id and status beyond it. Bodies are limited to 1 MB
 * (the contract's limit outside /templates/send, and what the bus stores).
 */
export function registerProviderWebhooks(router: Router, deps: { bus: Bus; appSecret: string; verifyToken: string; log: Logger }): void {
  router.get("/provider/webhooks", (req, res) => {
    const mode = req.query["hub.mode"];
    const token = req.query["hub.verify_token"];
    const challenge = req.query["hub.challenge"];
    if (mode === "subscribe" && typeof token === "string" && token === deps.verifyToken && typeof challenge === "string") {
      res.status(200).type("text/plain").send(challenge);
      return;
    }
    throw new ApiError("FORBIDDEN", "Verification token mismatch");
  });

  router.post("/provider/webhooks", express.raw({ type: () => true, limit: "1mb" }), async (req, res) => {
    const raw: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    if (!verifyProviderSignature(raw, req.header("x-hub-signature-256"), deps.appSecret)) {
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
        { msgId: createHash("sha256").update(raw).digest("hex") },
      );
    } catch (err) {
      // Retrying cannot help a batch larger than the bus stores (escaping can grow it past the 1 MB body limit).
      if ((err as { code?: string }).code === "MAX_PAYLOAD_EXCEEDED") throw new ApiError("PAYLOAD_TOO_LARGE", "The batch is too large");
      deps.log.error({ err: (err as Error).message }, "provider batch not stored");
      throw ApiError.unavailable("The batch could not be stored; retry");
    }
    res.status(200).json({ received: true });
  });
}
