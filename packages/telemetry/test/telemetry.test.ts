import { expect } from "chai";
import { trace } from "@opentelemetry/api";
import { SPAN_KIND, startOtlpReceiver } from "@platform/testing";
import { extractTrace, injectTrace, natsSpan, SpanKind, startSpan, endSpan, startTracing, traceparentOf, tracesUrl, tracingEnabled } from "../src";

const PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const fromHeader = (value: string | undefined) => extractTrace((name) => (name === "traceparent" ? value : undefined));

// In file order: first without an endpoint (the SDK must stay off), then with one (it starts once per process).
describe("telemetry", () => {
  it("reads the endpoint as the OpenTelemetry spec does", () => {
    expect(tracesUrl({})).to.equal(undefined);
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" })).to.equal("http://c:4318/v1/traces");
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x" })).to.equal("http://t:1/x");
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).to.equal(undefined);
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).to.equal(undefined);
  });

  it("without an endpoint registers no SDK, records nothing and passes a traceparent on unchanged", () => {
    const handle = startTracing("off-test", {});
    expect(handle.enabled).to.equal(false);
    expect(tracingEnabled()).to.equal(false);
    // The API's global provider is still the no-op one.
    expect(trace.getTracer("x").startSpan("y").isRecording()).to.equal(false);
    const parent = fromHeader(PARENT);
    const t = startSpan("GET /x", SpanKind.SERVER, parent);
    expect(t.span).to.equal(undefined);
    expect(traceparentOf(t.context)).to.equal(PARENT);
    expect(natsSpan("publish", "a.b", SpanKind.PRODUCER, undefined).context).to.equal(undefined);
    const headers: Record<string, string> = {};
    injectTrace(undefined, (k, v) => (headers[k] = v));
    expect(headers).to.deep.equal({});
    expect(fromHeader("garbage")).to.equal(undefined);
  });

  it("with an endpoint exports spans over OTLP/HTTP with the service name, parent links and one trace id", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const handle = startTracing("telemetry-test", { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
      expect(handle.enabled).to.equal(true);
      expect(tracingEnabled()).to.equal(true);
      const server = startSpan("GET /x", SpanKind.SERVER, fromHeader(PARENT));
      const publish = natsSpan("publish", "evt.x", SpanKind.PRODUCER, server.context, "evt_1");
      // What travels in the headers is the producer span's context: the consumer continues it.
      const sent = traceparentOf(publish.context)!;
      expect(sent.split("-")[1]).to.equal(PARENT.split("-")[1]);
      const consumer = natsSpan("process", "evt.x", SpanKind.CONSUMER, fromHeader(sent));
      endSpan(consumer.span);
      endSpan(publish.span);
      endSpan(server.span, new Error("boom"));
      await handle.shutdown();
      const spans = receiver.spans;
      expect(spans.map((s) => s.name).sort()).to.deep.equal(["GET /x", "evt.x process", "evt.x publish"]);
      expect(new Set(spans.map((s) => s.traceId))).to.deep.equal(new Set([PARENT.split("-")[1]]));
      expect(new Set(spans.map((s) => s.service))).to.deep.equal(new Set(["telemetry-test"]));
      const by = (name: string) => spans.find((s) => s.name === name)!;
      expect(by("GET /x").parentSpanId).to.equal(PARENT.split("-")[2]);
      expect(by("GET /x").kind).to.equal(SPAN_KIND.server);
      expect(by("evt.x publish").parentSpanId).to.equal(by("GET /x").spanId);
      expect(by("evt.x publish").kind).to.equal(SPAN_KIND.producer);
      expect(by("evt.x process").parentSpanId).to.equal(by("evt.x publish").spanId);
      expect(by("evt.x process").kind).to.equal(SPAN_KIND.consumer);
    } finally {
      await receiver.close();
    }
  });
});
