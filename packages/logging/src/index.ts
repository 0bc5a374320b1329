import { AsyncLocalStorage } from "node:async_hooks";
import { trace, type Context } from "@opentelemetry/api";
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
   * The OpenTelemetry context the request is handled in (@platform/telemetry):
   * its current span when tracing is on, else the W3C trace context the
   * request came with, passed on unchanged over HTTP and NATS headers.
   */
  trace?: Context;
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
  if (ctx.trace) {
    const traceId = trace.getSpanContext(ctx.trace)?.traceId;
    if (traceId) fields.traceId = traceId;
  }
  return fields;
}

/**
 * JSON logs on stdout: a constant message plus fields, e.g.
 * `log.error({ webhookId, attempt }, "webhook delivery failed")`.
 * Every line has `service`, and inside a request (or a bus message caused by
 * one) its `requestId` and `organizationId` (and `traceId` in a traced request).
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
