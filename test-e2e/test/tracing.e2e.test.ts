import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { eventually, SPAN_KIND, startOtlpReceiver, type ReceivedSpan } from "@platform/testing";
import { E2E } from "./stack";

/** A webhook endpoint answering 204; keeps the headers of what it got. */
async function endpoint() {
  const received: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received.push(req.headers);
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

/** The chain of spans from `span` up to its trace's root, as far as the receiver has them. */
function ancestry(spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const byId = new Map(spans.filter((s) => s.traceId === span.traceId).map((s) => [s.spanId, s]));
  const chain = [span];
  for (let s = span; s.parentSpanId && byId.has(s.parentSpanId); ) {
    s = byId.get(s.parentSpanId)!;
    chain.push(s);
  }
  return chain;
}

const describeChain = (chain: ReceivedSpan[]) => chain.map((s) => `${s.service}:${s.name}(${s.kind})`).join(" <- ");

/**
 * OpenTelemetry on the real stack: every process exports OTLP/HTTP to a
 * receiver run by the test (OTEL_EXPORTER_OTLP_ENDPOINT), and one request's
 * spans, across the gateway, services, HTTP hops, NATS and the outbox, form
 * one trace with unbroken parent links.
 */
describe("e2e: tracing — OpenTelemetry spans across gateway, services, NATS and the outbox", function () {
  this.timeout(240_000);
  const e2e = new E2E();
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  before(async () => {
    receiver = await startOtlpReceiver();
    // A short batch delay only makes the spans arrive sooner; the test waits for them with a deadline anyway.
    await e2e.start({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "200" });
  });
  after(async () => {
    await e2e.stop();
    await receiver?.close();
  });

  const sim = (path: string, body: unknown) =>
    fetch(`${e2e.stack.simulatorUrl}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });

  it("an inbound provider webhook, messaging and the webhook delivery share one trace; the integrator gets no traceparent", async () => {
    const org = await e2e.organization({ plan: "growth" });
    const phoneNumberId = String(300_000_000 + Math.floor(Math.random() * 600_000_000));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Trace", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId });
    expect(channel.status).to.equal(201);
    const hook = await endpoint();
    try {
      const created = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, { url: hook.url, events: ["message.received"] });
      expect(created.status).to.equal(201);
      expect((await sim("/_sim/inbound", { phoneNumberId, from: "15550009999", text: "trace me" })).status).to.be.within(200, 299);

      // The delivery's client span, and its chain up to the root: the gateway's server span of the provider webhook.
      let last = "";
      const chain = await eventually(() => {
        const delivery = receiver.spans.find((s) => s.service === "webhook-dispatcher" && s.kind === SPAN_KIND.client && s.attributes["webhook.id"] === created.body.id);
        if (!delivery) return undefined;
        const c = ancestry(receiver.spans, delivery);
        last = describeChain(c);
        const root = c[c.length - 1];
        return root.service === "gateway" && root.kind === SPAN_KIND.server && root.parentSpanId === "" ? c : undefined;
      }, 60_000).catch((err: Error) => {
        throw new Error(`${err.message}: chain ${last}`);
      });
      const text = describeChain(chain);
      expect(chain[chain.length - 1].name, text).to.equal("POST /provider/webhooks");
      // gateway publishes the batch → messaging consumes it and writes message.received to its outbox → the relay
      // publishes it (same trace) → the dispatcher consumes it → delivers.
      const kinds = chain.map((s) => `${s.service}:${s.kind}`);
      for (const step of [
        `gateway:${SPAN_KIND.producer}`,
        `messaging:${SPAN_KIND.consumer}`,
        `messaging:${SPAN_KIND.producer}`,
        `webhook-dispatcher:${SPAN_KIND.consumer}`,
        `webhook-dispatcher:${SPAN_KIND.client}`,
      ]) {
        expect(kinds, text).to.include(step);
      }
      await eventually(() => hook.received.length > 0, 30_000);
      for (const headers of hook.received) {
        expect(headers).to.not.have.property("traceparent");
        expect(headers).to.not.have.property("tracestate");
      }
    } finally {
      await hook.close();
    }
  });

  it("a send through the gateway continues the caller's trace: gateway, proxy hop, messaging, contacts' opt-out RPC and the provider call", async () => {
    const org = await e2e.organization({ plan: "growth" });
    const phoneNumberId = String(300_000_000 + Math.floor(Math.random() * 600_000_000));
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Send", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId });
    expect(channel.status).to.equal(201);
    expect((await sim("/_sim/inbound", { phoneNumberId, from: "15550008888", text: "hi" })).status).to.be.within(200, 299);

    // The caller's own trace: its id and span id, as a client instrumented with OpenTelemetry sends them. Retried
    // until the inbound message opened the service window; each try is its own trace.
    const { traceId, callerSpan } = await eventually(async () => {
      const attempt = { traceId: randomBytes(16).toString("hex"), callerSpan: randomBytes(8).toString("hex") };
      const res = await e2e.call("POST", "/api/v1/messages", {
        token: org.key,
        headers: { traceparent: `00-${attempt.traceId}-${attempt.callerSpan}-01` },
        body: { to: "+15550008888", text: "traced" },
      });
      return res.status === 200 ? attempt : undefined;
    }, 20_000);

    const byService = (spans: ReceivedSpan[], service: string, kind: number) => spans.filter((s) => s.service === service && s.kind === kind);
    let lastSeen = "";
    const mine = await eventually(() => {
      const spans = receiver.spans.filter((s) => s.traceId === traceId);
      lastSeen = describeChain(spans);
      const ok =
        byService(spans, "gateway", SPAN_KIND.server).some((s) => s.name === "POST /api/v1/messages") &&
        byService(spans, "gateway", SPAN_KIND.client).length > 0 &&
        byService(spans, "messaging", SPAN_KIND.server).some((s) => s.name === "POST /api/v1/messages") &&
        byService(spans, "contacts", SPAN_KIND.server).length > 0 &&
        byService(spans, "messaging", SPAN_KIND.client).some((s) => s.attributes["peer.service"] === "provider") &&
        // Each process exports on its own schedule: wait until every span's parent has arrived (all but the gateway's).
        spans.every((s) => s.parentSpanId === callerSpan || spans.some((p) => p.spanId === s.parentSpanId));
      return ok ? spans : undefined;
    }, 60_000).catch((err: Error) => {
      throw new Error(`${err.message}: spans of the trace: ${lastSeen}`);
    });

    const gateway = mine.find((s) => s.service === "gateway" && s.kind === SPAN_KIND.server && s.name === "POST /api/v1/messages")!;
    expect(gateway.parentSpanId, "the gateway continues the caller's span").to.equal(callerSpan);
    const hop = byService(mine, "gateway", SPAN_KIND.client).find((s) => s.parentSpanId === gateway.spanId);
    expect(hop, "the proxy hop is a child of the gateway's server span").to.not.equal(undefined);
    const messaging = byService(mine, "messaging", SPAN_KIND.server).find((s) => s.name === "POST /api/v1/messages")!;
    expect(messaging.parentSpanId, "messaging's server span is a child of the hop").to.equal(hop!.spanId);
    // The opt-out check: messaging's request span → contacts' responder span.
    const contacts = byService(mine, "contacts", SPAN_KIND.server)[0];
    const rpc = mine.find((s) => s.spanId === contacts.parentSpanId)!;
    expect(rpc, "contacts' span has its parent in the trace").to.not.equal(undefined);
    expect([rpc.service, rpc.kind, rpc.name.endsWith(" request")]).to.deep.equal(["messaging", SPAN_KIND.client, true]);
    expect(ancestry(mine, rpc).map((s) => s.spanId), `the RPC is under messaging's server span: ${describeChain(ancestry(mine, rpc))}`).to.include(messaging.spanId);
    const provider = byService(mine, "messaging", SPAN_KIND.client).find((s) => s.attributes["peer.service"] === "provider")!;
    expect(ancestry(mine, provider).map((s) => s.spanId), describeChain(ancestry(mine, provider))).to.include(messaging.spanId);
    // Every span of the trace hangs off another of it, but the gateway's (whose parent is the caller's).
    for (const s of mine) {
      if (s === gateway) continue;
      expect(mine.some((p) => p.spanId === s.parentSpanId), `${s.service}:${s.name} has its parent in the trace`).to.equal(true);
    }
  });
});
