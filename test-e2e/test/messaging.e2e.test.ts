import { createHmac } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { collectSubject, eventually } from "@platform/testing";
import { verifySignature, verifyStandardWebhook } from "@platform/webhook-verify";
import { E2E } from "./stack";

interface Received {
  raw: string;
  headers: http.IncomingHttpHeaders;
  body: { event: string; timestamp: string; organizationId: string; data: Record<string, any> };
}

/** A real webhook receiver on loopback, verifying signatures over the raw bytes as an integrator would. */
async function receiver() {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      received.push({ raw, headers: req.headers, body: JSON.parse(raw) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * How long each step may take to show up. A deadline to poll against, not a speed requirement: in the replicas run
 * (two of every process on two cores, right after the fuzzing suite) a step has taken more than 15 s, on the code of
 * before 2026-11-26 as well (1 run in 4); normally each takes under half a second.
 */
const WAIT_MS = 45_000;

describe("e2e: a conversation through the gateway, the simulator and webhooks", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  before(() => e2e.start());
  after(() => e2e.stop());

  it("an Idempotency-Key's first answer stands across a change of plan, a first 402 included", async () => {
    const org = await e2e.organization();
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, {
      name: "Plans",
      phoneNumber: "+15550100000",
      providerPhoneNumberId: `pn-plan-${Date.now()}-${Math.floor(Math.random() * 1e6)}`,
    });
    expect(channel.status).to.equal(201);
    const body = { to: "+15550002222", text: "plan" };
    const send = (key: string) => e2e.call("POST", "/api/v1/messages", { token: org.key, body, headers: { "Idempotency-Key": key } });
    const plan = async (p: string) => expect((await e2e.admin("PATCH", `/admin/v1/organizations/${org.id}`, { plan: p })).status).to.equal(200);

    // The first answer (no window yet: 400), then the plan lapses: the repeat is answered the same, replayed.
    const first = await send("e2e-plan-1");
    expect([first.status, first.body.error?.code]).to.deep.equal([400, "OUTSIDE_SERVICE_WINDOW"]);
    await plan("inactive");
    const lapsed = await send("e2e-plan-1");
    expect([lapsed.status, lapsed.headers.get("idempotent-replayed"), lapsed.body]).to.deep.equal([400, "true", first.body]);
    // Under the lapsed plan a new key's first answer is 402, and stays its answer once the plan covers sends again.
    const refused = await send("e2e-plan-2");
    expect([refused.status, refused.body.error?.code]).to.deep.equal([402, "PAYMENT_REQUIRED"]);
    await plan("growth");
    const renewed = await send("e2e-plan-2");
    expect([renewed.status, renewed.headers.get("idempotent-replayed"), renewed.body.error?.code]).to.deep.equal([402, "true", "PAYMENT_REQUIRED"]);
    // Without a key the plan decides each time.
    expect((await e2e.call("POST", "/api/v1/messages", { token: org.key, body })).status).to.equal(400);
  });

  it("takes a signed provider batch of exactly 1 MB, however much escaping grows it on the bus, and stores its inbound message whole", async () => {
    const org = await e2e.organization();
    const phoneNumberId = String(100_000_000 + Math.floor(Math.random() * 899_999_999));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Big", phoneNumber: "+15550100001", providerPhoneNumberId: phoneNumberId });
    expect(channel.status).to.equal(201);
    const from = String(15_550_000_000 + Math.floor(Math.random() * 9_999_999));
    const batch = (text: string) =>
      JSON.stringify({
        object: "whatsapp_business_account",
        entry: [{ id: "waba_sim", changes: [{ field: "messages", value: {
          messaging_product: "whatsapp",
          metadata: { display_phone_number: "15550100001", phone_number_id: phoneNumberId },
          contacts: [{ profile: { name: "Big" }, wa_id: from }],
          messages: [{ from, id: `wamid.big${Date.now()}`, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: text } }],
        } }] }],
      });
    // Quotes: 2 bytes each in the body, 4 once the body is a string in the bus's envelope (over NATS' 1 MB).
    const room = 1_048_576 - Buffer.byteLength(batch(""));
    const text = '"'.repeat(Math.floor(room / 2)) + "a".repeat(room % 2);
    const body = batch(text);
    expect(Buffer.byteLength(body)).to.equal(1_048_576);
    const signature = `sha256=${createHmac("sha256", e2e.stack.env.PROVIDER_APP_SECRET ?? "dev-app-secret").update(body).digest("hex")}`;
    const bus = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.message.received.v1`);
    try {
      const posted = await fetch(`${e2e.stack.url}/provider/webhooks`, { method: "POST", headers: { "Content-Type": "application/json", "X-Hub-Signature-256": signature }, body });
      expect(posted.status).to.equal(200);
      const received = await eventually(() => bus.received.find((m) => m.data.data?.phone === `+${from}`), WAIT_MS);
      const message = await e2e.call("GET", `/api/v1/messages/${received.data.data.messageId}`, { token: org.key });
      expect([message.status, message.body.direction, message.body.text === text]).to.deep.equal([200, "inbound", true]);
    } finally {
      await bus.close();
    }
  });

  it("inbound message → reply → statuses → events on the bus and signed webhooks; opt-outs block", async () => {
    const sim = e2e.stack.simulatorUrl!;
    const org = await e2e.organization();
    const phoneNumberId = String(100_000_000 + Math.floor(Math.random() * 899_999_999));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, {
      name: "Support",
      phoneNumber: "+15550100000",
      providerPhoneNumberId: phoneNumberId,
    });
    expect(channel.status).to.equal(201);

    const hooks = await receiver();
    const webhook = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, {
      url: hooks.url,
      events: ["message.received", "message.sent", "message.delivered", "message.read", "conversation.opened", "optout.created"],
    });
    expect(webhook.status).to.equal(201);
    const secret: string = webhook.body.secret;
    const bus = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.>`);

    try {
      // No inbound message yet: outside the 24-hour window.
      const early = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+15550001111", text: "Hi" } });
      expect(early.status).to.equal(400);
      expect(early.body.error.code).to.equal("OUTSIDE_SERVICE_WINDOW");

      // The customer writes in.
      const injected = await fetch(`${sim}/_sim/inbound`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ phoneNumberId, from: "15550001111", text: "Hello, I need help", name: "Ana" }),
      });
      expect(injected.status).to.be.within(200, 299);
      const received = await eventually(() => bus.received.find((m) => m.data.event === "message.received"), WAIT_MS);
      expect(received.data.organizationId).to.equal(org.id);
      expect(received.data.data).to.include({ phone: "+15550001111", type: "text", text: "Hello, I need help", messagingChannelId: channel.body.id });

      const contacts = await e2e.call("GET", "/api/v1/contacts", { token: org.key });
      expect(contacts.status).to.equal(200);
      expect(contacts.body.items).to.have.length(1);
      expect(contacts.body.items[0]).to.include({ phone: "+15550001111", name: "Ana", isOptedOut: false });

      // We answer, in the window, with a phone variant of the same number.
      const sent = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+1 (555) 000-1111", text: "How can we help?" } });
      expect(sent.status).to.equal(200);
      expect(sent.body.contactId).to.equal(contacts.body.items[0].id);
      expect(sent.body.conversationId).to.equal(received.data.data.conversationId);
      const messageId = sent.body.id;
      for (const status of ["sent", "delivered", "read"]) {
        await eventually(() => bus.received.find((m) => m.data.event === `message.${status}` && m.data.data.messageId === messageId), WAIT_MS);
      }

      const conversations = await e2e.call("GET", "/api/v1/conversations", { token: org.key });
      expect(conversations.body.items).to.have.length(1);
      expect(conversations.body.items[0].status).to.equal("open");

      // Webhooks arrive signed; verified over the raw bytes with the published helper. With two dispatchers (the
      // replicas run) the events of one message are delivered in parallel, in any order: wait for all of them.
      const expected = ["message.received", "conversation.opened", "message.sent", "message.delivered", "message.read"];
      await eventually(() => expected.every((e) => hooks.received.some((r) => r.body.event === e)), WAIT_MS);
      for (const r of hooks.received) {
        expect(verifySignature(r.raw, r.headers["x-service-signature"] as string, secret)).to.equal(true);
        expect(r.headers["user-agent"]).to.equal("Service-Webhooks/1");
        expect(r.headers["x-service-event"]).to.equal(r.body.event);
        expect(
          verifyStandardWebhook(r.raw, {
            "webhook-id": r.headers["webhook-id"] as string,
            "webhook-timestamp": r.headers["webhook-timestamp"] as string,
            "webhook-signature": r.headers["webhook-signature"] as string,
          }, secret),
        ).to.equal(true);
      }
      const events = hooks.received.map((r) => r.body.event);
      expect(events).to.include.members(expected);

      // An opt-out through the API blocks the next send at once.
      const optOut = await e2e.call("POST", "/api/v1/opt-outs", {
        token: org.key,
        body: { action: "set", messagingChannelId: channel.body.id, phone: "+15550001111", reason: "asked by phone" },
      });
      expect(optOut.status).to.equal(200);
      expect(optOut.body.active).to.equal(true);
      const blocked = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+15550001111", text: "One more thing" } });
      expect(blocked.status).to.equal(403);
      expect(blocked.body).to.deep.equal({ error: { code: "CONTACT_OPTED_OUT", message: "Contact opted out" } });
      await eventually(() => hooks.received.some((r) => r.body.event === "optout.created" && r.body.data.source === "api"), WAIT_MS);

      // A second customer sends STOP: a keyword opt-out on that channel.
      await fetch(`${sim}/_sim/inbound`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ phoneNumberId, from: "15550002222", text: "  stop " }),
      });
      const keyword = await eventually(
        () => bus.received.find((m) => m.data.event === "optout.created" && m.data.data.source === "keyword"),
        WAIT_MS,
      );
      expect(keyword.data.data).to.include({ phone: "+15550002222", messagingChannelId: channel.body.id });
    } finally {
      await bus.close();
      await hooks.close();
    }
  });
});
