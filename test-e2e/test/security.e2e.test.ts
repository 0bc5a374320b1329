import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { eventually } from "@platform/testing";
import { E2E } from "./stack";

/**
 * What must never reach the logs, at the default `info` level: API keys,
 * webhook signing secrets, the provider's tokens and secrets, the admin and
 * internal tokens, and what customers write or are sent. Captured from every
 * process of a real stack while one whole conversation runs through it.
 */
describe("e2e: secrets and message texts stay out of the logs", function () {
  this.timeout(180_000);
  const secrets = {
    providerToken: `prov-token-${randomBytes(12).toString("hex")}`,
    appSecret: `app-secret-${randomBytes(12).toString("hex")}`,
    verifyToken: `verify-${randomBytes(12).toString("hex")}`,
  };
  const e2e = new E2E();
  before(() =>
    e2e.start({
      LOG_LEVEL: "info",
      PROVIDER_ACCESS_TOKEN: secrets.providerToken,
      PROVIDER_APP_SECRET: secrets.appSecret,
      PROVIDER_VERIFY_TOKEN: secrets.verifyToken,
    }),
  );
  after(() => e2e.stop());

  it("logs no key, secret, token or message text while a conversation, a webhook and refusals run", async () => {
    const received: string[] = [];
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push(Buffer.concat(chunks).toString("utf8"));
        // A failing answer too, so the dispatcher's failure path logs as well.
        res.writeHead(received.length === 1 ? 500 : 204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const org = await e2e.organization();
      const phoneNumberId = String(100_000_000 + Math.floor(Math.random() * 899_999_999));
      const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, {
        name: "Support",
        phoneNumber: "+15550100000",
        providerPhoneNumberId: phoneNumberId,
      });
      expect(channel.status).to.equal(201);
      const webhook = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
        events: ["message.received", "message.sent"],
      });
      expect(webhook.status).to.equal(201);

      const inboundText = `inbound-${randomBytes(8).toString("hex")}`;
      const replyText = `reply-${randomBytes(8).toString("hex")}`;
      const injected = await fetch(`${e2e.stack.simulatorUrl}/_sim/inbound`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ phoneNumberId, from: "15550002222", text: inboundText, name: "Ana" }),
      });
      expect(injected.status).to.be.within(200, 299);
      await eventually(() => received.some((r) => r.includes(inboundText)), 20_000);
      const sent = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+15550002222", text: replyText } });
      expect(sent.status).to.equal(200);
      await eventually(() => received.some((r) => r.includes(sent.body.id) && r.includes("message.sent")), 20_000);

      // Refusals log too: a wrong key, a wrong admin token, a forged provider signature, a bad verify token.
      expect((await e2e.call("GET", "/api/v1/ping", { token: `${org.key}x` })).status).to.equal(401);
      expect((await e2e.call("GET", "/admin/v1/organizations", { token: `${e2e.stack.adminToken}x` })).status).to.equal(401);
      const forged = await fetch(`${e2e.stack.url}/provider/webhooks`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Hub-Signature-256": "sha256=00" },
        body: JSON.stringify({ object: "whatsapp_business_account", entry: [] }),
      });
      expect(forged.status).to.equal(401);
      const handshake = await fetch(`${e2e.stack.url}/provider/webhooks?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1`);
      expect(handshake.status).to.equal(403);

      const logs = e2e.logs.join("\n");
      // The capture works: lines of this very conversation are there (by ids, never by content).
      expect(logs, "the stack logged this organization's requests").to.include(org.id);
      const forbidden: Record<string, string> = {
        "API key": org.key,
        "webhook secret": webhook.body.secret,
        "provider access token": secrets.providerToken,
        "provider app secret": secrets.appSecret,
        "provider verify token": secrets.verifyToken,
        "admin token": e2e.stack.adminToken,
        "internal token": e2e.stack.internalToken,
        "inbound text": inboundText,
        "reply text": replyText,
      };
      for (const [what, value] of Object.entries(forbidden)) {
        expect(logs.includes(value), `${what} appears in the logs`).to.equal(false);
      }
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
