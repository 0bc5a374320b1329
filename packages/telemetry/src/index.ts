import { hostname } from "node:os";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapGetter, type TextMapSetter, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import type { Logger } from "@platform/logging";

export { SpanKind, SpanStatusCode, type Context, type Span };

/**
 * OpenTelemetry traces for every process of the platform, in one place
 * (docs/adr/0011-opentelemetry-traces.md).
 *
 * With `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`
 * set, `startTracing` starts the SDK (a tracer provider with a batch span
 * processor exporting OTLP/HTTP JSON, `service.name` = the service) and the
 * helpers below record spans: a server span per HTTP request, a client span
 * per outgoing HTTP call, producer / consumer / request spans on NATS. With
 * neither set (or `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`) no
 * SDK is started and the helpers record nothing: a `traceparent` that came in
 * is passed on unchanged (the same W3C propagator injects the context it was
 * extracted to), at the cost of reading one header.
 *
 * Contexts are passed explicitly (the request context of @platform/logging
 * keeps the current one across awaits), so no global context manager is
 * registered and nothing is patched.
 */

const propagator = new W3CTraceContextPropagator();
const getter: TextMapGetter<(name: string) => unknown> = {
  keys: () => ["traceparent", "tracestate"],
  get: (get, key) => {
    const v = get(key);
    return typeof v === "string" ? v : Array.isArray(v) && typeof v[0] === "string" ? v[0] : undefined;
  },
};
const setter: TextMapSetter<(name: string, value: string) => void> = { set: (set, key, value) => set(key, value) };

let tracer: Tracer | undefined;
let provider: BasicTracerProvider | undefined;

/** True once `startTracing` started the SDK in this process (an OTLP endpoint is configured). */
export function tracingEnabled(): boolean {
  return tracer !== undefined;
}

export interface TracingHandle {
  enabled: boolean;
  /** Where spans go (the OTLP/HTTP traces URL); undefined when off. */
  url?: string;
  /** Exports what is buffered and stops the SDK (at shutdown). */
  shutdown(): Promise<void>;
}

/** The OTLP/HTTP traces URL the environment configures, as the OpenTelemetry spec reads it; undefined for none. */
export function tracesUrl(env: NodeJS.ProcessEnv): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === "none") return undefined;
  const signal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (signal) return signal;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (base) return `${base.replace(/\/+$/, "")}/v1/traces`;
  return undefined;
}

/**
 * Starts the SDK when an OTLP endpoint is configured (once per process; a
 * second call answers the first's handle). Off otherwise: no provider is
 * registered and `trace.getTracer()` stays the API's no-op.
 */
export function startTracing(service: string, env: NodeJS.ProcessEnv = process.env, log?: Logger): TracingHandle {
  const url = tracesUrl(env);
  if (!url) {
    log?.info({ tracing: "off" }, "tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT)");
    return { enabled: false, shutdown: async () => undefined };
  }
  if (!provider) {
    provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        [ATTR_SERVICE_NAME]: env.OTEL_SERVICE_NAME?.trim() || service,
        "service.instance.id": env.REPLICA_ID || `${hostname()}:${process.pid}`,
      }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))],
    });
    trace.setGlobalTracerProvider(provider);
    tracer = provider.getTracer("@platform/telemetry");
  }
  log?.info({ tracing: "on", url }, "tracing on (OTLP/HTTP)");
  const current = provider;
  return { enabled: true, url, shutdown: () => current.shutdown() };
}

/** The trace context a set of headers (HTTP or NATS) carries: `traceparent` (+ `tracestate`); undefined when none is valid. */
export function extractTrace(get: (name: string) => unknown): Context | undefined {
  if (get("traceparent") === undefined) return undefined;
  const ctx = propagator.extract(ROOT_CONTEXT, get, getter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** Writes the context's `traceparent` (+ `tracestate`) through `set`; nothing for no context. */
export function injectTrace(ctx: Context | undefined, set: (name: string, value: string) => void): void {
  if (ctx) propagator.inject(ctx, set, setter);
}

/** The context's `traceparent` header value, for storing it (the outbox); null for none. */
export function traceparentOf(ctx: Context | undefined): string | null {
  let value: string | null = null;
  injectTrace(ctx, (name, v) => {
    if (name === "traceparent") value = v;
  });
  return value;
}

/** The trace id of a context (log lines), when it has one. */
export function traceIdOf(ctx: Context | undefined): string | undefined {
  return ctx ? trace.getSpanContext(ctx)?.traceId : undefined;
}

/**
 * A span being recorded and the context it makes current; `span` is
 * undefined when tracing is off, and `context` is then the parent's (passed on).
 */
export interface Traced {
  span: Span | undefined;
  context: Context | undefined;
}

/** Starts a span under `parent` (a remote or local context; a new trace without one). */
export function startSpan(name: string, kind: SpanKind, parent: Context | undefined, attributes?: Attributes): Traced {
  if (!tracer) return { span: undefined, context: parent };
  const span = tracer.startSpan(name, { kind, attributes }, parent ?? ROOT_CONTEXT);
  return { span, context: trace.setSpan(parent ?? ROOT_CONTEXT, span) };
}

/** Ends a span; an error marks it failed (its message, not the stack). */
export function endSpan(span: Span | undefined, err?: unknown): void {
  if (!span) return;
  if (err !== undefined) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    if (err instanceof Error) span.recordException({ name: err.name, message: err.message });
  }
  span.end();
}

/** Runs `fn` inside a span (ended when it settles; a throw marks it failed). */
export async function inSpan<T>(name: string, kind: SpanKind, parent: Context | undefined, attributes: Attributes | undefined, fn: (t: Traced) => Promise<T>): Promise<T> {
  const t = startSpan(name, kind, parent, attributes);
  if (!t.span) return fn(t);
  try {
    const result = await fn(t);
    endSpan(t.span);
    return result;
  } catch (err) {
    endSpan(t.span, err);
    throw err;
  }
}

/**
 * The server span of one HTTP request: named `<METHOD> <route template>` when
 * the answer is sent (`route()` is read then), with the status; 5xx marks it
 * failed. Answers the context the request's handling runs in.
 */
export function httpServerSpan(
  method: string | undefined,
  headers: Record<string, unknown>,
  res: { statusCode: number; once(event: "finish" | "close", cb: () => void): unknown },
  route: () => string,
): Context | undefined {
  const parent = extractTrace((name) => headers[name]);
  if (!tracer) return parent;
  const m = method ?? "GET";
  const t = startSpan(m, SpanKind.SERVER, parent, { "http.request.method": m });
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    const r = route();
    t.span!.updateName(`${m} ${r}`);
    t.span!.setAttribute("http.route", r);
    t.span!.setAttribute("http.response.status_code", res.statusCode);
    if (res.statusCode >= 500) t.span!.setStatus({ code: SpanStatusCode.ERROR });
    t.span!.end();
  };
  res.once("finish", end);
  res.once("close", end);
  return t.context;
}

/** A client span for an outgoing HTTP call (`<METHOD>`, with the URL's host); `end(status)` or `endSpan(span, err)`. */
export function httpClientSpan(method: string, url: string, parent: Context | undefined, attributes?: Attributes): Traced & { end(status?: number, err?: unknown): void } {
  let host: string | undefined;
  if (tracer) {
    try {
      host = new URL(url).host;
    } catch {
      host = undefined;
    }
  }
  const t = startSpan(method, SpanKind.CLIENT, parent, tracer ? { "http.request.method": method, "server.address": host, ...attributes } : undefined);
  return {
    ...t,
    end(status?: number, err?: unknown) {
      if (!t.span) return;
      if (status !== undefined) {
        t.span.setAttribute("http.response.status_code", status);
        if (status >= 500 && err === undefined) t.span.setStatus({ code: SpanStatusCode.ERROR });
      }
      endSpan(t.span, err);
    },
  };
}

/**
 * A span of a NATS operation (OpenTelemetry messaging conventions): `<subject> publish` (PRODUCER),
 * `<subject> process` (CONSUMER, or SERVER for a request/reply responder), `<subject> request` (CLIENT).
 */
export function natsSpan(operation: "publish" | "process" | "request", subject: string, kind: SpanKind, parent: Context | undefined, messageId?: string): Traced {
  if (!tracer) return { span: undefined, context: parent };
  const attributes: Attributes = { "messaging.system": "nats", "messaging.destination.name": subject, "messaging.operation.type": operation === "request" ? "send" : operation };
  if (messageId) attributes["messaging.message.id"] = messageId;
  return startSpan(`${subject} ${operation}`, kind, parent, attributes);
}
