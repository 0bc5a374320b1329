import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { PLATFORM_METRICS } from "@platform/http";
import { collectSubject, eventually } from "@platform/testing";
import { E2E, serviceOf } from "./stack";

/** A webhook endpoint answering `status` to everything; counts what it got. */
async function endpoint(status: number) {
  let hits = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      hits++;
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    hits: () => hits,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Prometheus text → samples (name with labels → value). */
function samples(text: string): Array<{ name: string; labels: string; value: number }> {
  const out: Array<{ name: string; labels: string; value: number }> = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m) out.push({ name: m[1], labels: m[2] ?? "", value: Number(m[3]) });
  }
  return out;
}

/** Gauges whose healthy value is 0 (a drained backlog): present is enough. */
const ZERO_OK = new Set([
  "bus_consumer_pending",
  "bus_consumer_ack_pending",
  "bus_consumer_redelivered_pending",
  "outbox_depth",
  "outbox_oldest_age_seconds",
  "outbox_relay_active",
  "gateway_upstream_in_flight",
  "gateway_upstream_busy_total",
]);
const SERVICES = ["gateway", "messaging", "contacts", "webhook-dispatcher", "template-jobs", "analytics"];
const WITH_OUTBOX = ["gateway", "messaging", "contacts", "template-jobs"];
const CONSUMERS = ["messaging", "contacts", "webhook-dispatcher", "template-jobs", "analytics"];

describe("e2e: observability — metrics of every service and one request id through every service's logs", function () {
  this.timeout(240_000);
  const e2e = new E2E();
  before(() => e2e.start({ LOG_LEVEL: "debug", WEBHOOK_RETRY_DELAYS_MS: "20,20,20" }));
  after(() => e2e.stop());

  const sim = (path: string, body: unknown) =>
    fetch(`${e2e.stack.simulatorUrl}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const lines = () =>
    e2e.logs.flatMap((l) => {
      const m = /^\[([^\]]+)\] (\{.*\})$/.exec(l);
      if (!m) return [];
      try {
        return [{ process: m[1], rec: JSON.parse(m[2]) as Record<string, unknown> }];
      } catch {
        return [];
      }
    });

  it("a request id set at the gateway appears on the lines of every service the request reaches, with its organization", async () => {
    const org = await e2e.organization({ plan: "growth" });
    const phoneNumberId = String(300_000_000 + Math.floor(Math.random() * 600_000_000));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Trace", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId });
    expect(channel.status).to.equal(201);
    const ok = await endpoint(204);
    const hook = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, { url: ok.url, events: ["optout.created"] });
    expect(hook.status).to.equal(201);
    try {
      // Each request's id, set by the caller, on the lines of every service it reaches.
      const follow = async (requestId: string, services: string[]) =>
        eventually(() => {
          const mine = lines().filter((l) => l.rec.requestId === requestId);
          const by = new Set(mine.map((l) => l.rec.service));
          const answered = mine.some((l) => l.rec.service === "gateway" && l.rec.msg === "request finished" && l.rec.status === 200);
          return answered && services.every((name) => by.has(name)) ? mine : undefined;
        }, 20_000).catch((err: Error) => {
          const mine = lines().filter((l) => l.rec.requestId === requestId);
          throw new Error(`${err.message}: ${requestId} wanted on ${services.join(", ")}; lines: ${JSON.stringify(mine.map((l) => [l.process, l.rec.msg]))}`);
        });
      const check = (traced: Array<{ process: string; rec: Record<string, unknown> }>, path: string) => {
        for (const l of traced) {
          // Every line is its own service's, and carries the request's organization.
          expect(l.rec.service, JSON.stringify(l.rec)).to.equal(serviceOf(l.process));
          expect(l.rec.organizationId, JSON.stringify(l.rec)).to.equal(org.id);
        }
        expect(traced.filter((l) => l.rec.service === "gateway" && l.rec.msg === "request finished").map((l) => [l.rec.path, l.rec.status])).to.deep.equal([[path, 200]]);
      };

      // An opt-out: gateway → contacts (HTTP) → contacts' outbox → optout.created on the bus → the webhook dispatcher.
      const optOutId = `trace-optout-${Date.now()}`;
      const res = await e2e.call("POST", "/api/v1/opt-outs", {
        token: org.key,
        headers: { "X-Request-Id": optOutId },
        body: { action: "set", messagingChannelId: channel.body.id, phone: "+15550007777", reason: "trace" },
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.headers.get("x-request-id")).to.equal(optOutId);
      check(await follow(optOutId, ["gateway", "contacts", "webhook-dispatcher"]), "/api/v1/opt-outs");

      // A send: gateway → messaging (HTTP) → contacts (request/reply over NATS) → the send work queue (JetStream).
      await sim("/_sim/inbound", { phoneNumberId, from: "15550008888", text: "hi" });
      // Retried until the inbound message opened the service window; each try has its own id.
      let tries = 0;
      const sendId = await eventually(async () => {
        const id = `trace-send-${Date.now()}-${tries++}`;
        const sent = await e2e.call("POST", "/api/v1/messages", { token: org.key, headers: { "X-Request-Id": id }, body: { to: "+15550008888", text: "hello" } });
        return sent.status === 200 ? id : undefined;
      }, 20_000);
      check(await follow(sendId, ["gateway", "messaging", "contacts"]), "/api/v1/messages");

      // Reads of template-jobs and analytics.
      for (const [path, service] of [["/api/v1/templates", "template-jobs"], ["/api/v1/analytics", "analytics"]] as const) {
        const id = `trace-${service}-${Date.now()}`;
        const day = new Date().toISOString().slice(0, 10);
        const read = await e2e.call("GET", service === "analytics" ? `${path}?startDate=${day}&endDate=${day}` : path, { token: org.key, headers: { "X-Request-Id": id } });
        expect(read.status, `${path} ${JSON.stringify(read.body)}`).to.equal(200);
        check(await follow(id, ["gateway", service]), path);
      }
    } finally {
      await ok.close();
    }
  });

  it("the events of provider batches (inbound, statuses) and of a template job's sends carry the request id that caused them", async () => {
    const org = await e2e.organization({ plan: "growth" });
    const phoneNumberId = String(300_000_000 + Math.floor(Math.random() * 600_000_000));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Batches", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId, messagesPerSecond: 1000 });
    expect(channel.status).to.equal(201);
    const bus = await collectSubject(e2e.env.natsUrl, `${e2e.env.namespace}.evt.>`);
    const events = (type: string) => bus.received.filter((m) => m.data?.organizationId === org.id && m.data?.event === type);
    // The request ids of the provider's webhook calls, from the gateway's `request finished` lines.
    const providerRequests = () =>
      new Set(lines().filter((l) => l.rec.service === "gateway" && l.rec.msg === "request finished" && l.rec.path === "/provider/webhooks").map((l) => l.rec.requestId));
    try {
      // An inbound provider batch: messaging writes its events in one set-based statement (group commit).
      expect((await sim("/_sim/inbound", { phoneNumberId, from: "15550003333", text: "batch" })).status).to.be.within(200, 299);
      const received = await eventually(() => events("message.received")[0], 30_000);
      const inboundId = received.headers["X-Request-Id"];
      expect(inboundId, "message.received has the provider webhook's request id").to.be.a("string");
      expect(events("conversation.opened").map((m) => m.headers["X-Request-Id"])).to.deep.equal([inboundId]);
      await eventually(() => providerRequests().has(inboundId) || undefined, 20_000);
      await eventually(() => lines().some((l) => l.rec.service === "messaging" && l.rec.requestId === inboundId) || undefined, 20_000);

      // A send (batched send statement), then the provider's status callbacks for it (set-based status statement).
      const sendId = `trace-batch-send-${Date.now()}`;
      const sent = await e2e.call("POST", "/api/v1/messages", { token: org.key, headers: { "X-Request-Id": sendId }, body: { to: "+15550003333", text: "reply" } });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
      const sentEvent = await eventually(() => events("message.sent").find((m) => m.data.data.messageId === sent.body.id), 30_000);
      // Written by the send statement (the send's id) or, when the simulator's `sent` callback won the race, by the status statement.
      await eventually(() => sentEvent.headers["X-Request-Id"] === sendId || providerRequests().has(sentEvent.headers["X-Request-Id"]) || undefined, 20_000);
      const delivered = await eventually(() => events("message.delivered").find((m) => m.data.data.messageId === sent.body.id), 60_000);
      const statusId = delivered.headers["X-Request-Id"];
      expect(statusId, "message.delivered has the status callback's request id").to.be.a("string");
      expect(statusId).to.not.equal(sendId);
      await eventually(() => providerRequests().has(statusId) || undefined, 20_000);

      // A template job: its run continues the request that created it, and so do its sends' events.
      const providerTemplateId = String(5_000_000 + Math.floor(Math.random() * 1e9));
      const template = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/templates`, {
        name: "batch_tpl", language: "en_US", category: "UTILITY", status: "approved", bodyParameterCount: 1, providerTemplateId, templateAccountId: "waba_e2e",
      });
      expect(template.status, JSON.stringify(template.body)).to.equal(201);
      const jobRequestId = `trace-batch-job-${Date.now()}`;
      const job = await e2e.call("POST", "/api/v1/templates/send", {
        token: org.key,
        headers: { "X-Request-Id": jobRequestId },
        body: { templateId: providerTemplateId, templateAccountId: "waba_e2e", messagingChannelId: channel.body.id, recipients: [{ phone: "+15550004441", bodyParameters: ["A"] }, { phone: "+15550004442", bodyParameters: ["B"] }] },
      });
      expect(job.status, JSON.stringify(job.body)).to.equal(200);
      await eventually(async () => (await e2e.call("GET", `/api/v1/templates/send/${job.body.id}`, { token: org.key })).body.status === "completed" || undefined, 60_000);
      // The two recipients' conversations were opened by the job's store statement (bulk, one statement per batch).
      await eventually(() => events("conversation.opened").filter((m) => m.headers["X-Request-Id"] === jobRequestId).length === 2 || undefined, 30_000);
      // Their `message.sent`: from the job's sends (the job's request id) or from the simulator's callbacks.
      const recipients = new Set(events("conversation.opened").filter((m) => m.headers["X-Request-Id"] === jobRequestId).map((m) => m.data.data.contactId));
      expect(recipients.size).to.equal(2);
      for (const service of ["gateway", "template-jobs", "messaging"]) {
        await eventually(() => lines().some((l) => l.rec.service === service && l.rec.requestId === jobRequestId) || undefined, 20_000);
      }
      // Every message event of the organization carries a request id.
      expect(bus.received.filter((m) => m.data?.organizationId === org.id && !m.headers["X-Request-Id"]).map((m) => m.data.event)).to.deep.equal([]);
    } finally {
      await bus.close();
    }
  });

  it("without an OTLP endpoint, no service starts the OpenTelemetry SDK", () => {
    // Each process says so once at start (info level; this suite runs at debug).
    const off = new Set(lines().filter((l) => l.rec.tracing === "off").map((l) => l.process));
    const on = lines().filter((l) => l.rec.tracing === "on");
    expect(on).to.deep.equal([]);
    for (const name of e2e.stack.names().filter((n) => n !== "provider-simulator")) expect(off, name).to.include(name);
  });

  it("after an end-to-end run, every service's /metrics has each platform metric with a non-zero sample", async () => {
    const org = await e2e.organization({ plan: "growth" });
    const phoneNumberId = String(300_000_000 + Math.floor(Math.random() * 600_000_000));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, {
      name: "Metrics", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId, messagesPerSecond: 1000,
    });
    expect(channel.status).to.equal(201);
    const failing = await endpoint(500);
    const hook = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, { url: failing.url, events: ["message.received"] });
    expect(hook.status).to.equal(201);
    try {
      // Inbound messages (events to a failing webhook: 4 attempts each, deactivated after 10 failures).
      for (let i = 0; i < 4; i++) {
        const injected = await sim("/_sim/inbound", { phoneNumberId, from: "15550001111", text: `hello ${i}` });
        expect(injected.status).to.be.within(200, 299);
      }
      await eventually(async () => {
        const hooks = await e2e.admin("GET", `/admin/v1/organizations/${org.id}/webhooks`);
        return hooks.body.items?.find((w: { id: string; active: boolean }) => w.id === hook.body.id)?.active === false ? true : undefined;
      }, 60_000);

      // One send that fails transiently at the provider, then goes through on a retry (a redelivery).
      expect((await sim("/_sim/mode", { kind: "error", httpStatus: 500, code: 1, times: 1 })).status).to.equal(200);
      const sent = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+15550001111", text: "reply" } });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
      await eventually(async () => {
        const { requests } = (await (await fetch(`${e2e.stack.simulatorUrl}/_sim/requests`)).json()) as { requests: Array<{ body: any; responseStatus: number }> };
        return requests.some((r) => r.body?.text?.body === "reply" && r.responseStatus === 200) || undefined;
      }, 60_000);

      // A template job of two recipients.
      const providerTemplateId = String(5_000_000 + Math.floor(Math.random() * 1e9));
      const template = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/templates`, {
        name: "metrics_tpl", language: "en_US", category: "UTILITY", status: "approved", bodyParameterCount: 1, providerTemplateId, templateAccountId: "waba_e2e",
      });
      expect(template.status, JSON.stringify(template.body)).to.equal(201);
      const job = await e2e.call("POST", "/api/v1/templates/send", {
        token: org.key,
        body: { templateId: providerTemplateId, templateAccountId: "waba_e2e", messagingChannelId: channel.body.id, recipients: [{ phone: "+15550004444", bodyParameters: ["A"] }, { phone: "+15550005555", bodyParameters: ["B"] }] },
      });
      expect(job.status, JSON.stringify(job.body)).to.equal(200);
      await eventually(async () => (await e2e.call("GET", `/api/v1/templates/send/${job.body.id}`, { token: org.key })).body.status === "completed" || undefined, 60_000);

      // An opt-out (contacts' outbox) and a rate-limited organization (gateway 429).
      expect((await e2e.call("POST", "/api/v1/opt-outs", { token: org.key, body: { action: "set", messagingChannelId: channel.body.id, phone: "+15550006666" } })).status).to.equal(200);
      const limited = await e2e.organization({ rateLimit: { perSecond: 1, burst: 1 } });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await e2e.call("GET", "/api/v1/ping", { token: limited.key })).status);
      expect(statuses).to.include(429);
      const day = new Date().toISOString().slice(0, 10);
      expect((await e2e.call("GET", `/api/v1/analytics?startDate=${day}&endDate=${day}`, { token: org.key })).status).to.equal(200);

      // Every replica of the service (one with a single process), its samples together.
      const scrape = async (name: string) => {
        const urls = e2e.serviceUrls(name);
        expect(urls, name).to.not.be.empty;
        const all = [];
        for (const url of urls) {
          const res = await fetch(`${url}/metrics`);
          expect(res.status).to.equal(200);
          all.push(...samples(await res.text()));
        }
        return all;
      };
      const expected = (service: string): string[] => [
        "http_request_duration_seconds",
        ...(CONSUMERS.includes(service) ? PLATFORM_METRICS.bus : []),
        ...(WITH_OUTBOX.includes(service) ? PLATFORM_METRICS.outbox : []),
        ...((PLATFORM_METRICS as Record<string, readonly string[]>)[service] ?? []),
      ];
      // Counters that only the replica doing the work increments: summed over the services that may.
      const nonZeroSomewhere = new Set(["bus_redeliveries_total", "outbox_published_total"]);
      let lastBad: string[] = [];
      const missing = await eventually(async () => {
        const bad: string[] = [];
        lastBad = bad;
        const totals = new Map<string, number>();
        for (const service of SERVICES) {
          const got = await scrape(service);
          for (const metric of expected(service)) {
            const series = got.filter((s) => s.name === metric || s.name === `${metric}_count`);
            if (series.length === 0 && !nonZeroSomewhere.has(metric)) {
              bad.push(`${service}: ${metric} has no sample`);
              continue;
            }
            const sum = series.reduce((a, s) => a + s.value, 0);
            totals.set(metric, (totals.get(metric) ?? 0) + sum);
            if (!ZERO_OK.has(metric) && !nonZeroSomewhere.has(metric) && sum <= 0) bad.push(`${service}: ${metric} is 0`);
          }
        }
        for (const metric of nonZeroSomewhere) if (!(totals.get(metric)! > 0)) bad.push(`${metric} is 0 on every service`);
        return bad.length === 0 ? bad : undefined;
      }, 30_000).catch(() => lastBad);
      expect(missing.join("\n")).to.equal("");
    } finally {
      await failing.close();
    }
  });
});
