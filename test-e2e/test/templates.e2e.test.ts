import { expect } from "chai";
import { ApiError, MessagingClient, type TemplateSendRequest } from "@platform/sdk";
import { collectSubject, eventually } from "@platform/testing";
import { E2E } from "./stack";

/** Template jobs through the gateway as an integrator sees them: plans, the 16 MB limit, the simulator's recorded sends. */
describe("e2e: templates and bulk template jobs through the gateway", function () {
  this.timeout(240_000);
  const e2e = new E2E();
  before(() => e2e.start());
  after(() => e2e.stop());

  const simRequests = async () => ((await (await fetch(`${e2e.stack.simulatorUrl}/_sim/requests`)).json()) as { requests: Array<{ body: any; phoneNumberId: string; responseStatus: number }> }).requests;
  let seq = 0;
  const uniquePhoneNumberId = () => String(200_000_000 + Math.floor(Math.random() * 700_000_000) + seq++);

  async function orgWithChannelAndTemplate(plan = "growth", bodyParameterCount = 1) {
    const org = await e2e.organization({ plan });
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, {
      name: "Bulk", phoneNumber: "+15550100000", providerPhoneNumberId: uniquePhoneNumberId(), messagesPerSecond: 1000,
    });
    expect(channel.status).to.equal(201);
    const providerTemplateId = String(5_000_000 + Math.floor(Math.random() * 1e9));
    const template = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/templates`, {
      name: "order_update", language: "en_US", category: "UTILITY", status: "approved", bodyParameterCount,
      providerTemplateId, templateAccountId: "waba_e2e", headerFormat: "image",
    });
    expect(template.status, JSON.stringify(template.body)).to.equal(201);
    return { org, channelId: channel.body.id as string, providerPhoneNumberId: channel.body.providerPhoneNumberId as string, template: template.body };
  }

  it("sends a job: components, opted-out skipped, progress; the status webhook pauses the template; other tenants see 404", async () => {
    const { org, channelId, providerPhoneNumberId, template } = await orgWithChannelAndTemplate();
    // The integrator's side goes through the typed SDK.
    const client = new MessagingClient({ baseUrl: e2e.stack.url, apiKey: org.key });
    const templates = await client.templates.list({ limit: 10 }).toArray();
    expect(templates.map((t) => t.id)).to.deep.equal([template.id]);

    const optOut = await client.optOuts.set({ messagingChannelId: channelId, phone: "+15550002222" });
    expect(optOut.active).to.equal(true);
    const body: TemplateSendRequest = {
      templateId: template.providerTemplateId,
      templateAccountId: "waba_e2e",
      messagingChannelId: channelId,
      headerMedia: { url: "https://example.com/banner.png" },
      recipients: [
        { phone: "+1 555 000 1111", bodyParameters: ["Ann"], buttonParameters: [{ type: "quick_reply", payload: "TRACK" }] },
        { phone: "+15550002222", bodyParameters: ["Bob"] },
        { phone: "0015550003333", bodyParameters: ["Cy"] },
      ],
    };
    const created = await client.templates.sendWithAnswer(body, { idempotencyKey: "e2e-job-1" });
    expect(created.replayed).to.equal(false);
    expect(created.data).to.include({ templateId: template.id, scheduledFor: null });
    const replay = await client.templates.sendWithAnswer(body, { idempotencyKey: "e2e-job-1" });
    expect(replay.replayed).to.equal(true);
    expect(replay.data.id).to.equal(created.data.id);

    const done = await eventually(async () => {
      const job = await client.templates.getJob(created.data.id);
      return job.status === "completed" ? job : undefined;
    }, 30_000);
    expect(done).to.include({ recipients: 3, sent: 2, skipped: 1, failed: 0 });
    const sends = (await simRequests()).filter((r) => r.phoneNumberId === providerPhoneNumberId);
    expect(sends.map((r) => r.body.to).sort()).to.deep.equal(["15550001111", "15550003333"]);
    const ann = sends.find((r) => r.body.to === "15550001111")!;
    expect(ann.body.template.components).to.deep.equal([
      { type: "header", parameters: [{ type: "image", image: { link: "https://example.com/banner.png" } }] },
      { type: "body", parameters: [{ type: "text", text: "Ann" }] },
      { type: "button", sub_type: "quick_reply", index: "0", parameters: [{ type: "payload", payload: "TRACK" }] },
    ]);

    const other = new MessagingClient({ baseUrl: e2e.stack.url, apiKey: (await e2e.organization()).key });
    expect(await other.templates.getJob(created.data.id).catch((e: unknown) => e)).to.include({ status: 404, code: "NOT_FOUND" });
    expect(await other.templates.list().toArray()).to.deep.equal([]);

    // The provider pauses the template: status webhook → gateway → bus → template-jobs.
    const bus = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.template.status_updated.v1`);
    try {
      const injected = await fetch(`${e2e.stack.simulatorUrl}/_sim/template-status`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ templateAccountId: "waba_e2e", providerTemplateId: Number(template.providerTemplateId), name: "order_update", language: "en_US", event: "PAUSED" }),
      });
      expect(injected.status).to.equal(200);
      const event = await eventually(() => bus.received.find((m) => m.data.data.templateId === template.id), 15_000);
      expect(event.data.data).to.include({ status: "paused", previousStatus: "approved", providerTemplateId: template.providerTemplateId });
    } finally {
      await bus.close();
    }
    const refused = await client.templates.send({ ...body, recipients: body.recipients.slice(0, 1) }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(ApiError);
    expect(refused).to.include({ status: 403, code: "TEMPLATE_NOT_APPROVED" });
  });

  it("plans: starter and inactive get 402 on POST /api/v1/templates/send; reads stay open", async () => {
    for (const plan of ["starter", "inactive"]) {
      const { org, channelId, template } = await orgWithChannelAndTemplate(plan);
      const res = await e2e.call("POST", "/api/v1/templates/send", {
        token: org.key,
        body: { templateId: template.id, messagingChannelId: channelId, recipients: [{ phone: "+15550001111", bodyParameters: ["x"] }] },
      });
      expect(res.status, plan).to.equal(402);
      expect(res.body.error.code).to.equal("PAYMENT_REQUIRED");
      expect((await e2e.call("GET", "/api/v1/templates", { token: org.key })).status, plan).to.equal(200);
    }
  });

  it("a cancel stops a running job where it is: sends it held back are `cancelled` in analytics, never failed, and no message.failed names them", async () => {
    const { org, channelId, providerPhoneNumberId, template } = await orgWithChannelAndTemplate();
    const slow = await e2e.admin("PATCH", `/admin/v1/organizations/${org.id}/channels/${channelId}`, { messagesPerSecond: 20 });
    expect(slow.status).to.equal(200);
    const events = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.>`);
    const simMode = (mode: unknown) => fetch(`${e2e.stack.simulatorUrl}/_sim/mode`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(mode) });
    const calls = async (status: number) => (await simRequests()).filter((r) => r.phoneNumberId === providerPhoneNumberId && r.responseStatus === status).length;
    const day = new Date().toISOString().slice(0, 10);
    try {
      const recipients = Array.from({ length: 40 }, (_, i) => ({ phone: `+1415${String(6_000_000 + i)}`, bodyParameters: [`n${i}`] }));
      const job = await e2e.call("POST", "/api/v1/templates/send", { token: org.key, body: { templateId: template.id, messagingChannelId: channelId, recipients, headerMedia: { url: "https://example.com/a.png" } } });
      expect(job.status, JSON.stringify(job.body)).to.equal(200);
      await eventually(async () => (await e2e.call("GET", `/api/v1/templates/send/${job.body.id}`, { token: org.key })).body.sent >= 4, 30_000);
      // The provider slows the number down (130429): messaging holds those sends for a retry.
      expect((await simMode({ kind: "error", httpStatus: 429, code: 130429, message: "throughput", times: 1_000_000 })).status).to.equal(200);
      await eventually(async () => (await calls(429)) >= 2, 30_000);
      const cancel = await e2e.call("POST", `/api/v1/templates/send/${job.body.id}/cancel`, { token: org.key });
      expect(cancel.status).to.equal(200);
      expect(cancel.body).to.include({ status: "cancelled", failed: 0 });
      expect(cancel.body.sent).to.equal(await calls(200));
      // Every stored send is either at the provider or cancelled; none failed, none pending.
      const analytics = await eventually(async () => {
        const a = await e2e.call("GET", `/api/v1/analytics?startDate=${day}&endDate=${day}`, { token: org.key });
        const c = a.body.outboundMessages.counts;
        return c.cancelled >= 2 && c.sent + c.delivered + c.read === cancel.body.sent && !c.pending ? a.body.outboundMessages : undefined;
      }, 30_000);
      expect(analytics.counts.failed).to.equal(0);
      expect(analytics.total).to.equal(cancel.body.sent + analytics.counts.cancelled);
      expect(events.received.filter((e) => e.data.event === "message.failed" && e.data.organizationId === org.id)).to.deep.equal([]);
      expect((await e2e.call("GET", `/api/v1/templates/send/${job.body.id}`, { token: org.key })).body).to.include({ sent: cancel.body.sent, failed: 0 });
    } finally {
      await simMode({ kind: "ok" });
      await events.close();
    }
  });

  it("takes 50,000 recipients in a body of about 15 MB through the gateway and refuses bodies over 16 MB with 413", async () => {
    const { org, channelId, template } = await orgWithChannelAndTemplate();
    const filler = "x".repeat(240);
    const recipients = Array.from({ length: 50_000 }, (_, i) => ({ phone: `+1415${String(3_000_000 + i)}`, bodyParameters: [`customer number ${i} ${filler}`] }));
    expect(JSON.stringify(recipients).length).to.be.within(14_000_000, 16_000_000);
    const scheduledAt = new Date(Date.now() + 24 * 3_600_000).toISOString();
    const big = await e2e.call("POST", "/api/v1/templates/send", { token: org.key, body: { templateId: template.id, messagingChannelId: channelId, recipients, scheduledAt } });
    expect(big.status, JSON.stringify(big.body).slice(0, 300)).to.equal(200);
    expect(big.body).to.include({ recipients: 50_000, status: "queued", scheduledFor: scheduledAt });
    const cancel = await e2e.call("POST", `/api/v1/templates/send/${big.body.id}/cancel`, { token: org.key });
    expect(cancel.body.status).to.equal("cancelled");

    const tooBig = await e2e.call("POST", "/api/v1/templates/send", {
      token: org.key,
      body: { templateId: template.id, messagingChannelId: channelId, recipients: [{ phone: "+15550001111", bodyParameters: ["x".repeat(17 * 1024 * 1024)] }] },
    });
    expect(tooBig.status).to.equal(413);
    expect(tooBig.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
  });

  it("takes the most strings a request may hold, 50,000 recipients × 20 body parameters in about 16 MB, with an Idempotency-Key, under the services' 128 MB heap", async () => {
    const { org, channelId, template } = await orgWithChannelAndTemplate("growth", 20);
    const recipients = Array.from({ length: 50_000 }, (_, i) => ({
      phone: `+1415${String(3_000_000 + i)}`,
      bodyParameters: Array.from({ length: 20 }, (_, p) => `v${p}-${i}`.padEnd(11, "x")),
    }));
    expect(JSON.stringify(recipients).length).to.be.within(15_500_000, 16_700_000);
    const big = await e2e.call("POST", "/api/v1/templates/send", {
      token: org.key,
      headers: { "Idempotency-Key": `max-${Date.now()}` },
      body: { templateId: template.id, messagingChannelId: channelId, recipients, scheduledAt: "2099-01-01" },
    });
    // Before the recipients went to Postgres as one JSON parameter per chunk, template-jobs ran out of heap here (503).
    expect(big.status, JSON.stringify(big.body).slice(0, 300)).to.equal(200);
    expect(big.body).to.include({ recipients: 50_000, status: "queued", scheduledFor: "2099-01-01T00:00:00.000Z" });
    const cancel = await e2e.call("POST", `/api/v1/templates/send/${big.body.id}/cancel`, { token: org.key });
    expect(cancel.body.status).to.equal("cancelled");
  });
});
