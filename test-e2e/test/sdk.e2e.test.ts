import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { eventually } from "@platform/testing";
import { ApiError, MessagingClient, webhooks, type ClientOptions, type ResponseInfo, type RetryInfo } from "@platform/sdk";
import { E2E } from "./stack";

type Forwarded = { method: string; url: string; idempotencyKey?: string; answered: "503" | "dropped" | "forwarded" };

/**
 * A loopback HTTP front of the gateway whose `script` decides per request (1-based) whether to answer 503 with
 * `Retry-After: 1`, forward and then drop the answer (the caller's socket is destroyed after the stack answered),
 * or forward. It stands for a load balancer in a bad moment; the stack behind it is the real one.
 */
async function front(target: string, script: (n: number, req: http.IncomingMessage) => "503" | "drop" | "forward") {
  const seen: Forwarded[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const action = script(seen.length + 1, req);
      const record: Forwarded = { method: req.method!, url: req.url!, idempotencyKey: req.headers["idempotency-key"] as string | undefined, answered: "forwarded" };
      seen.push(record);
      if (action === "503") {
        record.answered = "503";
        res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "1" });
        res.end(JSON.stringify({ error: { code: "SERVICE_UNAVAILABLE", message: "Service unavailable" } }));
        return;
      }
      const headers: Record<string, string> = {};
      for (const name of ["authorization", "content-type", "idempotency-key", "accept"]) {
        const v = req.headers[name];
        if (typeof v === "string") headers[name] = v;
      }
      const upstream = await fetch(target + req.url, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      const body = Buffer.from(await upstream.arrayBuffer());
      if (action === "drop") {
        record.answered = "dropped";
        req.socket.destroy();
        return;
      }
      const out: Record<string, string> = {};
      upstream.headers.forEach((v, k) => {
        if (!["content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"].includes(k)) out[k] = v;
      });
      res.writeHead(upstream.status, out);
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The SDK against the whole stack, as an integrator uses it. */
describe("e2e: the typed SDK against the stack", function () {
  this.timeout(240_000);
  const e2e = new E2E();
  before(() => e2e.start());
  after(() => e2e.stop());

  let seq = 0;
  const uniquePhoneNumberId = () => String(300_000_000 + Math.floor(Math.random() * 600_000_000) + seq++);
  const simRequests = async () =>
    ((await (await fetch(`${e2e.stack.simulatorUrl}/_sim/requests`)).json()) as { requests: Array<{ body: any; phoneNumberId: string }> }).requests;

  function client(key: string, extra: Partial<ClientOptions> = {}) {
    const retries: RetryInfo[] = [];
    const responses: ResponseInfo[] = [];
    const sdk = new MessagingClient({
      baseUrl: e2e.stack.url,
      apiKey: key,
      retry: { baseDelayMs: 50, maxDelayMs: 5_000 },
      onRetry: (i) => retries.push(i),
      onResponse: (i) => responses.push(i),
      ...extra,
    });
    return { sdk, retries, responses };
  }

  async function orgWithChannel(body: Record<string, unknown> = {}) {
    const org = await e2e.organization(body);
    const providerPhoneNumberId = uniquePhoneNumberId();
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, {
      name: "SDK", phoneNumber: "+15550100000", providerPhoneNumberId, messagesPerSecond: 1000,
    });
    expect(channel.status, JSON.stringify(channel.body)).to.equal(201);
    return { org, channelId: channel.body.id as string, providerPhoneNumberId };
  }

  async function inbound(providerPhoneNumberId: string, from: string, text = "Hello") {
    const res = await fetch(`${e2e.stack.simulatorUrl}/_sim/inbound`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ phoneNumberId: providerPhoneNumberId, from, text }),
    });
    expect(res.status).to.be.within(200, 299);
  }

  it("covers every /api/v1 operation, the pagination helpers and the typed errors", async () => {
    const { org, channelId, providerPhoneNumberId } = await orgWithChannel();
    const { sdk, responses } = client(org.key);

    expect(await sdk.ping()).to.deep.equal({ ok: true, organizationId: org.id });

    // Five customers write in: five contacts and five conversations, walked two by two.
    const phones = ["+15550001001", "+15550001002", "+15550001003", "+15550001004", "+15550001005"];
    for (const phone of phones) await inbound(providerPhoneNumberId, phone.slice(1));
    await eventually(
      async () => (await sdk.conversations.listPage({ limit: 100 })).items.length === 5 && (await sdk.contacts.listPage({ limit: 100 })).items.length === 5,
      20_000,
    );

    const contactPhones: string[] = [];
    for await (const contact of sdk.contacts.list({ limit: 2 })) contactPhones.push(contact.phone);
    expect(contactPhones.sort()).to.deep.equal(phones);
    const pages: number[] = [];
    for await (const page of sdk.contacts.list({ limit: 2 }).pages()) pages.push(page.items.length);
    expect(pages).to.deep.equal([2, 2, 1]);
    const conversations = await sdk.conversations.list({ limit: 2 }).toArray();
    expect(conversations.map((c) => c.phone).sort()).to.deep.equal(phones);
    expect(conversations.every((c) => c.status === "open" && c.messagingChannelId === channelId)).to.equal(true);
    expect((await sdk.contacts.list({ limit: 3 }).toArray(4)).length).to.equal(4);

    // A send carries a fresh key; the same key again is the first answer, replayed.
    const sent = await sdk.messages.sendWithAnswer({ to: phones[0], text: "Hi from the SDK" });
    expect(sent.data.id).to.match(/^msg_/);
    expect(sent.idempotencyKey).to.match(/^[0-9a-f-]{36}$/);
    expect(sent.replayed).to.equal(false);
    const again = await sdk.messages.sendWithAnswer({ to: phones[0], text: "Hi from the SDK" }, { idempotencyKey: sent.idempotencyKey });
    expect(again.replayed).to.equal(true);
    expect(again.data).to.deep.equal(sent.data);
    expect(responses.filter((r) => r.path === "/api/v1/messages").map((r) => r.idempotencyKey)).to.deep.equal([sent.idempotencyKey, sent.idempotencyKey]);
    // The stored message whole, through the gateway.
    const record = await sdk.messages.get(sent.data.id);
    expect(record).to.include({ id: sent.data.id, direction: "outbound", type: "text", text: "Hi from the SDK", contactId: sent.data.contactId });

    // Typed errors with the contract's codes and the request id.
    const outside = await sdk.messages.send({ to: "+15550009999", text: "Hi" }).catch((e: unknown) => e);
    expect(outside).to.be.instanceOf(ApiError);
    expect(outside).to.include({ status: 400, code: "OUTSIDE_SERVICE_WINDOW" });
    expect((outside as ApiError).requestId).to.be.a("string").and.not.equal("");
    const invalid = await sdk.messages.send({ to: phones[0], text: "" }).catch((e: unknown) => e);
    expect(ApiError.is(invalid, "VALIDATION_ERROR")).to.equal(true);
    expect((invalid as ApiError).details?.map((d) => d.path)).to.include("text");
    const unauthorized = await client("svc_not_a_key").sdk.ping().catch((e: unknown) => e);
    expect(unauthorized).to.include({ status: 401, code: "UNAUTHORIZED", message: "Invalid API key" });

    // Opt-outs: set blocks a send, clear lets it through.
    expect(await sdk.optOuts.set({ messagingChannelId: channelId, phone: phones[1], reason: "asked" })).to.include({ active: true });
    const blocked = await sdk.messages.send({ to: phones[1], text: "Hi" }).catch((e: unknown) => e);
    expect(blocked).to.include({ status: 403, code: "CONTACT_OPTED_OUT" });
    const contact = (await sdk.contacts.list({ limit: 100 }).toArray()).find((c) => c.phone === phones[1]);
    expect(contact).to.include({ isOptedOut: true });
    const cleared = await sdk.optOuts.clear({ messagingChannelId: channelId, phone: phones[1] });
    expect(cleared.active).to.equal(false);
    expect(cleared.revokedAt).to.be.a("string");
    expect((await sdk.messages.send({ to: phones[1], text: "Hi again" })).id).to.match(/^msg_/);

    // Analytics of today: the two outbound messages.
    const today = new Date().toISOString().slice(0, 10);
    const analytics = await eventually(async () => {
      const a = await sdk.analytics.get({ startDate: today, endDate: today });
      return a.outboundMessages.total === 2 ? a : undefined;
    }, 20_000);
    expect(analytics.outboundMessages.counts).to.include.keys("sent", "delivered", "read", "failed");
    const badRange = await sdk.analytics.get({ startDate: "2026-02-01", endDate: "2026-01-01" }).catch((e: unknown) => e);
    expect(badRange).to.include({ code: "VALIDATION_ERROR" });

    // Templates: list, a job sent with an automatic key and followed to completion, a scheduled job cancelled.
    const providerTemplateId = String(6_000_000 + Math.floor(Math.random() * 1e9));
    const created = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/templates`, {
      name: "sdk_update", language: "en_US", category: "UTILITY", status: "approved", bodyParameterCount: 1,
      providerTemplateId, templateAccountId: "waba_sdk",
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const templates = [];
    for await (const template of sdk.templates.list({ limit: 1 })) templates.push(template);
    expect(templates.map((t) => t.id)).to.deep.equal([created.body.id]);
    expect(templates[0]).to.include({ status: "approved" });

    const job = await sdk.templates.send({
      templateId: created.body.id,
      messagingChannelId: channelId,
      recipients: [{ phone: phones[2], bodyParameters: ["Ann"] }, { phone: phones[3], bodyParameters: ["Bob"] }],
    });
    expect(job).to.include({ templateId: created.body.id, recipients: 2 });
    const done = await eventually(async () => {
      const j = await sdk.templates.getJob(job.id);
      return j.status === "completed" ? j : undefined;
    }, 30_000);
    expect(done).to.include({ sent: 2, failed: 0, skipped: 0 });
    const scheduled = await sdk.templates.send({
      templateId: created.body.id,
      messagingChannelId: channelId,
      scheduledAt: new Date(Date.now() + 3_600_000).toISOString(),
      recipients: [{ phone: phones[4], bodyParameters: ["Cy"] }],
    });
    expect(scheduled.status).to.equal("queued");
    expect(await sdk.templates.cancelJob(scheduled.id)).to.include({ id: scheduled.id, status: "cancelled" });
    const missing = await sdk.templates.getJob("job_does_not_exist").catch((e: unknown) => e);
    expect(missing).to.include({ status: 404, code: "NOT_FOUND" });

    // The webhook verification helper rides along.
    const raw = JSON.stringify({ event: "message.sent" });
    expect(webhooks.verifySignature(raw, webhooks.signBody(raw, "whsec_dGVzdA=="), "whsec_dGVzdA==")).to.equal(true);
  });

  it("retries 429 RATE_LIMITED after Retry-After under a tiny rate limit", async () => {
    const org = await e2e.organization({ rateLimit: { perSecond: 1, burst: 1 } });
    // Without retries the limit shows: of four concurrent pings, one token, the rest refused with Retry-After.
    const strict = client(org.key, { retry: { maxRetries: 0 } });
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => strict.sdk.ping().then(() => "ok", (e: unknown) => e)));
    const refused = outcomes.filter((o): o is ApiError => o instanceof ApiError);
    expect(refused.length).to.be.greaterThan(0);
    expect(refused[0]).to.include({ status: 429, code: "RATE_LIMITED" });
    expect(refused[0].retryAfterMs).to.be.at.least(1000);

    // With retries (the default policy, bounded) every ping ends answered, each refusal waited for its Retry-After.
    const patient = client(org.key, { retry: { maxRetries: 10, baseDelayMs: 100, maxDelayMs: 5_000 } });
    const answers = await Promise.all(Array.from({ length: 4 }, () => patient.sdk.ping()));
    expect(answers.every((a) => a.organizationId === org.id)).to.equal(true);
    expect(patient.retries.length).to.be.greaterThan(0);
    for (const r of patient.retries) {
      expect(r.status).to.equal(429);
      expect(r.retryAfterMs).to.be.at.least(1000);
      expect(r.delayMs).to.be.at.least(r.retryAfterMs!);
    }
  });

  it("retries a 503 with Retry-After, then gets the stack's answer", async () => {
    const org = await e2e.organization();
    const lb = await front(e2e.stack.url, (n) => (n === 1 ? "503" : "forward"));
    try {
      const { sdk, retries } = client(org.key, { baseUrl: lb.url });
      expect(await sdk.ping()).to.deep.equal({ ok: true, organizationId: org.id });
      expect(lb.seen.map((s) => s.answered)).to.deep.equal(["503", "forwarded"]);
      expect(retries).to.have.length(1);
      expect(retries[0]).to.include({ attempt: 1, status: 503, retryAfterMs: 1000 });
      expect(retries[0].delayMs).to.be.at.least(1000);
    } finally {
      await lb.close();
    }
  });

  it("retries a send whose answer was lost with the same Idempotency-Key: one message, the answer replayed", async () => {
    const { org, providerPhoneNumberId } = await orgWithChannel();
    await inbound(providerPhoneNumberId, "15550002001");
    const { sdk: direct } = client(org.key);
    await eventually(async () => (await direct.conversations.listPage()).items.length === 1 && (await direct.contacts.listPage()).items.length === 1, 20_000);

    const lb = await front(e2e.stack.url, (n, req) => (n === 1 && req.url === "/api/v1/messages" ? "drop" : "forward"));
    try {
      const { sdk, retries } = client(org.key, { baseUrl: lb.url });
      const answer = await sdk.messages.sendWithAnswer({ to: "+15550002001", text: "Your order shipped" });
      expect(lb.seen.map((s) => s.answered)).to.deep.equal(["dropped", "forwarded"]);
      expect(lb.seen[0].idempotencyKey).to.match(/^[0-9a-f-]{36}$/);
      expect(lb.seen[1].idempotencyKey).to.equal(lb.seen[0].idempotencyKey);
      expect(retries).to.have.length(1);
      expect(retries[0].status).to.equal(undefined); // no answer at all
      expect(answer.replayed).to.equal(true);
      expect(answer.idempotencyKey).to.equal(lb.seen[0].idempotencyKey);
      expect(answer.data.id).to.match(/^msg_/);
      // The provider was asked once for this number.
      const sends = (await simRequests()).filter((r) => r.phoneNumberId === providerPhoneNumberId && r.body?.to === "15550002001");
      expect(sends).to.have.length(1);
    } finally {
      await lb.close();
    }
  });
});
