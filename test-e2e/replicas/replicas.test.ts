import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { collectSubject, eventually } from "@platform/testing";
import { E2E } from "../test/stack";

/**
 * Two gateways and two replicas of every service on one machine, each
 * service's copies behind a local TCP round-robin (packages/stack `replicas`),
 * the gateways behind another: what must hold when everything runs twice.
 */
describe("replicas: two gateways and two replicas of every service behind round-robins", function () {
  this.timeout(600_000);
  const e2e = new E2E();
  before(() => e2e.start({ WEBHOOK_RETRY_DELAYS_MS: "50,50,50" }, { replicas: 2 }));
  after(() => e2e.stop());

  const sim = (path: string, body: unknown) =>
    fetch(`${e2e.stack.simulatorUrl}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const simRequests = async () =>
    ((await (await fetch(`${e2e.stack.simulatorUrl}/_sim/requests`)).json()) as { requests: Array<{ body: any; phoneNumberId: string; responseStatus: number }> }).requests;
  const newPhoneNumberId = () => String(400_000_000 + Math.floor(Math.random() * 500_000_000));

  it("runs two processes of everything", () => {
    const names = e2e.stack.names();
    for (const service of ["gateway", "messaging", "contacts", "webhook-dispatcher", "template-jobs", "analytics"]) {
      expect(names, service).to.include.members([`${service}-1`, `${service}-2`]);
    }
    expect(e2e.stack.gatewayUrls).to.have.length(2);
  });

  it("holds one organization's rate limit across both gateways (within 10 %)", async () => {
    const burst = 100;
    const perSecond = 1;
    const org = await e2e.organization({ rateLimit: { perSecond, burst } });
    const [a, b] = e2e.stack.gatewayUrls;
    const started = Date.now();
    let allowed = 0;
    for (let i = 0; i < 2 * burst; i++) {
      const res = await e2e.call("GET", "/api/v1/ping", { token: org.key, baseUrl: i % 2 ? b : a });
      if (res.status === 200) allowed++;
      else expect(res.status).to.equal(429);
      await new Promise((r) => setTimeout(r, 5));
    }
    // The budget: the burst plus what refilled while the requests ran.
    const budget = burst + perSecond * ((Date.now() - started) / 1000);
    expect(allowed, `admitted ${allowed} of a budget of ${budget.toFixed(1)}`).to.be.within(Math.floor(budget * 0.9), Math.ceil(budget * 1.1));
  });

  it("refuses a key revoked through one gateway on the other", async () => {
    const org = await e2e.organization();
    const [a, b] = e2e.stack.gatewayUrls;
    // Both gateways have the key cached (for 30 s).
    for (const url of [a, b]) expect((await e2e.call("GET", "/api/v1/ping", { token: org.key, baseUrl: url })).status).to.equal(200);
    const revoked = await e2e.call("DELETE", `/admin/v1/organizations/${org.id}/api-keys/${org.keyId}`, { token: e2e.stack.adminToken, baseUrl: a });
    expect(revoked.status).to.equal(204);
    // As in the foundation test: the 1 s bound is the broadcast eviction's, not measured here; a refusal within
    // this deadline (well under the 30 s cache) can only come from gateway B evicting the key on the broadcast.
    await eventually(async () => (await e2e.call("GET", "/api/v1/ping", { token: org.key, baseUrl: b })).status === 401, 10_000, 20);
  });

  it("runs a template job on exactly one replica: every recipient sent once", async () => {
    const org = await e2e.organization({ plan: "growth" });
    const phoneNumberId = newPhoneNumberId();
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Bulk", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId, messagesPerSecond: 1000 });
    expect(channel.status).to.equal(201);
    const providerTemplateId = String(5_000_000 + Math.floor(Math.random() * 1e9));
    const template = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/templates`, {
      name: "replicas_tpl", language: "en_US", category: "UTILITY", status: "approved", bodyParameterCount: 1, providerTemplateId, templateAccountId: "waba_e2e",
    });
    expect(template.status, JSON.stringify(template.body)).to.equal(201);
    const recipients = Array.from({ length: 200 }, (_, i) => ({ phone: `+1555061${String(i).padStart(4, "0")}`, bodyParameters: [`n${i}`] }));
    const job = await e2e.call("POST", "/api/v1/templates/send", {
      token: org.key,
      body: { templateId: providerTemplateId, templateAccountId: "waba_e2e", messagingChannelId: channel.body.id, recipients },
    });
    expect(job.status, JSON.stringify(job.body)).to.equal(200);
    const done = await eventually(async () => {
      const res = await e2e.call("GET", `/api/v1/templates/send/${job.body.id}`, { token: org.key });
      return res.body.status === "completed" ? res.body : undefined;
    }, 120_000);
    expect(done).to.include({ recipients: 200, sent: 200, failed: 0, skipped: 0 });
    const sends = (await simRequests()).filter((r) => r.phoneNumberId === phoneNumberId && r.responseStatus === 200);
    const to = sends.map((r) => r.body.to as string).sort();
    expect(to).to.deep.equal(recipients.map((r) => r.phone.slice(1)).sort());
  });

  it("delivers each webhook event once per attempt, not once per replica; analytics counts each message once", async () => {
    const org = await e2e.organization();
    const phoneNumberId = newPhoneNumberId();
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Main", phoneNumber: "+15550200000", providerPhoneNumberId: phoneNumberId, messagesPerSecond: 1000 });
    expect(channel.status).to.equal(201);
    // A receiver that refuses each event's first attempt: every event is delivered exactly twice (attempt 1 and 2).
    const attempts = new Map<string, number>();
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        const n = (attempts.get(body.data.id) ?? 0) + 1;
        attempts.set(body.data.id, n);
        res.writeHead(n === 1 ? 500 : 204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const bus = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.>`);
    try {
      const hook = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
        events: ["message.received"],
      });
      expect(hook.status).to.equal(201);
      // Fewer events than the 10 consecutive failures that deactivate a webhook: every first attempt fails, and when
      // they all finish before any retry succeeds (batches of inbound messages are handled together), ten of them
      // would deactivate the endpoint, as the contract says, and no retry would follow.
      const phones = Array.from({ length: 8 }, (_, i) => `+1555062${String(i).padStart(4, "0")}`);
      for (const p of phones) expect((await sim("/_sim/inbound", { phoneNumberId, from: p.slice(1), text: "hello" })).status).to.be.within(200, 299);
      const received = () => bus.received.filter((m) => m.data.event === "message.received" && m.data.organizationId === org.id);
      await eventually(() => received().length === phones.length || undefined, 60_000);
      const eventIds = received().map((m) => m.data.data.id as string).sort();
      await eventually(() => eventIds.every((id) => attempts.get(id) === 2) || undefined, 60_000).catch((err: Error) => {
        throw new Error(`${err.message}; attempts per event: ${JSON.stringify(eventIds.map((id) => attempts.get(id) ?? 0))}`);
      });
      // Nothing more arrives for them (a second replica's copy would be a third attempt). The dispatcher logs an
      // attempt once its answer is in, so the receiver can see the request before the log has its row: wait for the
      // log to hold every attempt, then check it holds no more.
      const settled = await eventually(async () => {
        const res = await e2e.admin("GET", `/admin/v1/organizations/${org.id}/webhooks/${hook.body.id}/deliveries?limit=100`);
        return res.status === 200 && res.body.items.length >= eventIds.length * 2 ? res : undefined;
      }, 30_000);
      expect([...attempts.keys()].sort()).to.deep.equal(eventIds);
      expect(settled.body.items.length).to.equal(eventIds.length * 2);
      expect(eventIds.every((id) => attempts.get(id) === 2)).to.equal(true);

      // Replies to every customer: analytics counts each message once, whichever replica consumed its events.
      // As an integrator's client: a 503 or 429 (a loaded machine: a dependency's answer came late) is retried with the
      // same Idempotency-Key, which makes the retry the same send, never a second one.
      for (const p of phones) {
        const res = await eventually(async () => {
          const r = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: p, text: "Thanks" }, headers: { "Idempotency-Key": `thanks-${p}` } });
          return r.status === 503 || r.status === 429 || (r.status === 409 && r.body?.error?.code === "IDEMPOTENCY_KEY_IN_USE") ? undefined : r;
        }, 30_000, 500);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
      }
      const dayBefore = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
      const dayAfter = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
      const path = `/api/v1/analytics?startDate=${dayBefore}&endDate=${dayAfter}`;
      const counted = await eventually(async () => {
        const res = await e2e.call("GET", path, { token: org.key });
        const m = res.body.outboundMessages;
        return m && m.total === phones.length && m.counts.sent + m.counts.delivered + m.counts.read + m.counts.failed === phones.length ? m : undefined;
      }, 60_000);
      expect(counted.total).to.equal(phones.length);
    } finally {
      await bus.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
