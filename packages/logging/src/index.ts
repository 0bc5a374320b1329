import { AsyncLocalStorage } from "node:async_hooks";
import pino from "pino";

export type Logger = pino.Logger;

/**
 * What a request (or a bus message caused by one) is about: every log line
 * written while it is handled carries these fields, and the bus copies the
 * request id into the headers of what it publishes.
 */
export interface RequestContext {
  requestId?: string;
  organizationId?: string;
  /**
   * The W3C trace context the request came with (`traceparent`, `tracestate`),
   * passed on unchanged over HTTP and NATS headers so a tracing system sees one
   * trace across services (no spans are recorded here).
   */
  traceparent?: string;
  tracestate?: string;
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The trace context of a set of headers (HTTP or NATS), when `traceparent` is well-formed. */
export function traceContextOf(get: (name: string) => string | string[] | undefined | null): Pick<RequestContext, "traceparent" | "tracestate"> {
  const parent = get("traceparent");
  if (typeof parent !== "string" || !TRACEPARENT.test(parent)) return {};
  const state = get("tracestate");
  return typeof state === "string" && state.length <= 512 ? { traceparent: parent, tracestate: state } : { traceparent: parent };
}

/** The current request's context, across awaits (AsyncLocalStorage). */
export const requestContext = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` with `ctx` as the current request context. */
export function withRequestContext<T>(ctx: RequestContext, fn: () => T): T {
  return requestContext.run(ctx, fn);
}

/** The current request context, if any. */
export function currentRequestContext(): RequestContext | undefined {
  return requestContext.getStore();
}

/** Adds the current request's id and organization to a log line; nothing outside a request. */
function contextFields(): object {
  const ctx = requestContext.getStore();
  if (!ctx) return {};
  const fields: Record<string, string> = {};
  if (ctx.requestId) fields.requestId = ctx.requestId;
  if (ctx.organizationId) fields.organizationId = ctx.organizationId;
  return fields;
}

/**
 * JSON logs on stdout: a constant message plus fields, e.g.
 * `log.error({ webhookId, attempt }, "webhook delivery failed")`.
 * Every line has `service`, and inside a request (or a bus message caused by
 * one) its `requestId` and `organizationId`.
 * Secrets are redacted wherever they might appear in a logged object.
 */
export function createLogger(service: string, level: string = process.env.LOG_LEVEL ?? "info", destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: contextFields,
    redact: {
      paths: [
        "secret",
        "*.secret",
        "key",
        "*.key",
        "token",
        "*.token",
        "req.headers.authorization",
        'req.headers["x-internal-token"]',
        "headers.authorization",
      ],
      censor: "[redacted]",
    },
    formatters: { level: (label) => ({ level: label }) },
  };
  return destination ? pino(options, destination) : pino(options);
}
