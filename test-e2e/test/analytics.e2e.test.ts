import { expect } from "chai";
import { collectSubject, eventually } from "@platform/testing";
import { E2E } from "./stack";

/**
 * Sends through the gateway, statuses come back from the simulator as
 * provider callbacks, and GET /api/v1/analytics agrees with what was sent,
 * delivered, read and failed. The simulator's automatic delivered/read
 * callbacks are pushed out of the test's time (10 minutes), so that each
 * message's final status is the one the test injects.
 */
describe("e2e: analytics through the gateway", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  before(() => e2e.start({ SIM_STATUS_DELAYS_MS: "20,600000,600000" }));
  after(() => e2e.stop());

  async function sim(path: string, body: unknown) {
    const res = await fetch(`${e2e.stack.simulatorUrl}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    expect(res.status, path).to.be.within(200, 299);
    return res.json().catch(() => undefined);
  }

  it("counts and rates equal what was sent, delivered, read and failed; every plan may read them", async () => {
    const org = await e2e.organization();
    const phoneNumberId = String(100_000_000 + Math.floor(Math.random() * 899_999_999));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Main", phoneNumber: "+15550200000", providerPhoneNumberId: phoneNumberId });
    expect(channel.status).to.equal(201);
    const bus = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.>`);
    const dayBefore = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    const dayAfter = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    try {
      const empty = await e2e.call("GET", `/api/v1/analytics?startDate=${dayBefore}&endDate=${dayAfter}`, { token: org.key });
      expect(empty.status).to.equal(200);
      expect(empty.body.outboundMessages).to.deep.equal({ total: 0, counts: { sent: 0, delivered: 0, read: 0, failed: 0 }, deliveryRate: 0, readRate: 0, failureRate: 0 });

      // Seven customers write in (opening the service window).
      const base = 1_000 + Math.floor(Math.random() * 8_000);
      const phones = Array.from({ length: 7 }, (_, i) => `+155503${base}${i}`);
      for (const p of phones) await sim("/_sim/inbound", { phoneNumberId, from: p.slice(1), text: "hello" });
      await eventually(() => bus.received.filter((m) => m.data.event === "message.received" && m.data.organizationId === org.id).length === 7, 30_000);

      const sent: Array<{ id: string; providerMessageId: string; phone: string }> = [];
      for (const p of phones) {
        const res = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: p, text: "Thanks for writing" } });
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        sent.push({ id: res.body.id, providerMessageId: res.body.providerMessageId, phone: p });
      }
      const has = (status: string, id: string) => bus.received.some((m) => m.data.event === `message.${status}` && m.data.data.messageId === id);
      for (const m of sent) await eventually(() => has("sent", m.id), 30_000);
      // The status events carry the message's createdAt.
      const anySent = bus.received.find((m) => m.data.event === "message.sent" && m.data.data.messageId === sent[0]!.id)!;
      expect(anySent.data.data.createdAt).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

      // Provider callbacks: 0 stays sent; 1, 2 delivered (2 twice); 3 delivered then read; 4 read before delivered
      // (out of order); 5 failed (undeliverable); 6 delivered then failed, then a late read that changes nothing.
      const status = async (i: number, s: string) => {
        const m = sent[i]!;
        const pmid = m.providerMessageId ?? bus.received.find((e) => e.data.event === "message.sent" && e.data.data.messageId === m.id)!.data.data.providerMessageId;
        const errors = s === "failed" ? [{ code: 131026, title: "Message undeliverable" }] : undefined;
        await sim("/_sim/status", { phoneNumberId, providerMessageId: pmid, status: s, recipientId: m.phone.slice(1), callbackData: m.id, errors });
      };
      await status(1, "delivered");
      await status(2, "delivered");
      await status(3, "delivered");
      await status(3, "read");
      await status(4, "read");
      await status(4, "delivered");
      await status(2, "delivered");
      await status(5, "failed");
      await status(6, "delivered");
      await status(6, "failed");
      await status(6, "read");
      for (const i of [5, 6]) await eventually(() => has("failed", sent[i]!.id), 30_000);
      for (const i of [1, 2]) await eventually(() => has("delivered", sent[i]!.id), 30_000);
      for (const i of [3, 4]) await eventually(() => has("read", sent[i]!.id), 30_000);

      const expected = { total: 7, counts: { sent: 1, delivered: 2, read: 2, failed: 2 }, deliveryRate: 2 / 7, readRate: 2 / 7, failureRate: 2 / 7 };
      const path = `/api/v1/analytics?startDate=${dayBefore}&endDate=${dayAfter}`;
      await eventually(async () => {
        const res = await e2e.call("GET", path, { token: org.key });
        return res.status === 200 && JSON.stringify(res.body.outboundMessages) === JSON.stringify(expected);
      }, 30_000);

      // A plan that may only read still reads analytics.
      const patched = await e2e.admin("PATCH", `/admin/v1/organizations/${org.id}`, { plan: "inactive" });
      expect(patched.status).to.equal(200);
      // In force when the PATCH answers (one gateway here): the next send is refused, so no message is added to the counts.
      const refused = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: phones[0], text: "x" } });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(402);
      const res = await e2e.call("GET", path, { token: org.key });
      expect(res.status).to.equal(200);
      expect(res.body.outboundMessages).to.deep.equal(expected);
      expect(res.body.period).to.deep.equal({ start: `${dayBefore}T00:00:00.000Z`, end: `${dayAfter}T23:59:59.999Z` });

      const bad = await e2e.call("GET", `/api/v1/analytics?startDate=${dayAfter}&endDate=${dayBefore}`, { token: org.key });
      expect(bad.status).to.equal(400);
      expect(bad.body.error.code).to.equal("VALIDATION_ERROR");
    } finally {
      await bus.close();
    }
  });
});
