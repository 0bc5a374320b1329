import { isUtf8 } from "node:buffer";
import { timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import express, { type ErrorRequestHandler, type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { currentRequestContext, withRequestContext, type Logger, type RequestContext } from "@platform/logging";
import { httpServerSpan } from "@platform/telemetry";
import { newId } from "@platform/id";
import { z } from "zod";
import { isDependencyDown } from "./dependency";
import { ApiError } from "./errors";
import { refuseDeepJson, zodDetails } from "./validate";

/** Headers the gateway sets for the services; a client's own copies are always dropped by the gateway. */
export const INTERNAL_HEADERS = {
  token: "x-internal-token",
  organization: "x-organization-id",
  requestId: "x-request-id",
  /**
   * "1": the organization's plan does not cover this keyed request. The gateway forwards it all the same, so that the
   * service answers a key's first answer again whatever the plan is now, and stores 402 as the first answer otherwise.
   */
  planRefused: "x-plan-refused",
} as const;

const REQUEST_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A keyed request's work, in its service: 402 when the gateway found the organization's plan does not cover it. */
export function refusePlanRefused(headers: IncomingHttpHeaders): void {
  if (headers[INTERNAL_HEADERS.planRefused] === "1") throw ApiError.paymentRequired();
}

/** The caller's `X-Request-Id` when it is sane, else a new one. */
export function requestIdFor(given: string | string[] | undefined): string {
  return typeof given === "string" && REQUEST_ID.test(given) ? given : newId("request");
}

/**
 * Takes the caller's `X-Request-Id` when it is sane, else makes one; echoes it
 * on the answer; the rest of the request runs in its request context (log
 * lines and bus headers carry the id). With `log` at debug level, one line per
 * finished request.
 */
export function requestId(log?: Logger): RequestHandler {
  return (req, res, next) => {
    const id = requestIdFor(req.header(INTERNAL_HEADERS.requestId));
    res.locals.requestId = id;
    res.setHeader("X-Request-Id", id);
    // The server span (tracing on) is named by the route template express matched, read when the answer is sent.
    const trace = httpServerSpan(req.method, req.headers, res, () => routeTemplate(req, res.statusCode));
    const ctx: RequestContext = { requestId: id, trace };
    res.locals.trace = trace;
    if (log) logFinished(log, req.method, res, () => req.originalUrl.split("?")[0], ctx);
    withRequestContext(ctx, next);
  };
}

/** The route template express matched (`/api/v1/contacts/:id`), for metrics and span names; `unmatched` for a 404. */
export function routeTemplate(req: Request, status: number): string {
  const route = req.route?.path as string | undefined;
  if (route !== undefined) return `${req.baseUrl}${route}`;
  return status === 404 ? "unmatched" : req.baseUrl || "other";
}

/** At debug level, one log line when the answer is sent: method, path, status, duration, request id and organization. */
export function logFinished(
  log: Logger,
  method: string | undefined,
  res: { statusCode: number; on(event: "finish", cb: () => void): unknown },
  path: () => string,
  ctx: { requestId?: string; organizationId?: string },
): void {
  if (!log.isLevelEnabled("debug")) return;
  const started = process.hrtime.bigint();
  res.on("finish", () => {
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    log.debug({ requestId: ctx.requestId, organizationId: ctx.organizationId, method, path: path(), status: res.statusCode, ms }, "request finished");
  });
}

/**
 * Refuses a URL carrying a NUL character (`%00`) in its path or query with
 * 400 VALIDATION_ERROR: Postgres cannot store or compare NUL in text, so such
 * a parameter would otherwise fail deep inside a query.
 */
export function refuseNulInUrl(): RequestHandler {
  return (req, _res, next) => {
    if (/%00|\u0000/i.test(req.originalUrl ?? req.url)) {
      next(ApiError.validation([{ path: "url", message: "must not contain NUL (%00)" }]));
      return;
    }
    next();
  };
}

/** JSON body parsing; the error middleware maps its failures to INVALID_JSON / PAYLOAD_TOO_LARGE. */
export function jsonBody(limit: string | number = "1mb"): RequestHandler {
  // JSON text is UTF-8 (RFC 8259 §8.1): bytes that are not are refused, never decoded into U+FFFD and stored altered.
  const parse = express.json({ limit, strict: false, type: ["application/json", "application/*+json"], verify: refuseNonUtf8 });
  return (req, res, next) => {
    // Labels of UTF-8 (or of its ASCII subset) that the parser does not know by these names: read as `utf-8`.
    const type = req.headers["content-type"];
    if (type && UTF8_LABEL.test(type)) req.headers["content-type"] = type.replace(UTF8_LABEL, "charset=utf-8");
    parse(req, res, (err?: unknown) => {
      if (err) return next(err);
      try {
        refuseDeepJson(req.body);
      } catch (refused) {
        return next(refused);
      }
      next();
    });
  };
}

/** Throws (body-parser: `entity.verify.failed`, answered INVALID_JSON) when the body's bytes are not UTF-8. */
function refuseNonUtf8(_req: unknown, _res: unknown, body: Buffer): void {
  if (!isUtf8(body)) throw new NotUtf8Error();
}

class NotUtf8Error extends Error {
  readonly type = "encoding.not-utf8";
  constructor() {
    super("The body is not UTF-8");
  }
}

/** `charset=utf8`, `us-ascii` or `ascii` (quoted or not, any case): the same bytes as UTF-8 for a JSON body. */
const UTF8_LABEL = /charset\s*=\s*"?(?:utf8|us-ascii|ascii)"?(?=\s*(?:;|$))/i;

/** The internal token check, in constant time. */
export function isInternalToken(given: string, token: string): boolean {
  const x = Buffer.from(given);
  const y = Buffer.from(token);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Services accept calls from the gateway only: the shared INTERNAL_TOKEN must
 * be present. The organization is taken from the gateway's header, which the
 * gateway always overwrites, so a client can never choose it.
 */
export function requireInternal(token: string): RequestHandler {
  return (req, res, next) => {
    const given = req.header(INTERNAL_HEADERS.token);
    if (!given || !isInternalToken(given, token)) {
      next(new ApiError("UNAUTHORIZED", "Internal token missing or invalid"));
      return;
    }
    const org = req.header(INTERNAL_HEADERS.organization);
    if (org) {
      res.locals.organizationId = org;
      const ctx = currentRequestContext();
      if (ctx) ctx.organizationId = org;
    }
    next();
  };
}

/** The calling organization, as set by the gateway. */
export function organizationOf(res: Response): string {
  const org = res.locals.organizationId;
  if (typeof org !== "string" || !org) throw new ApiError("UNAUTHORIZED", "Invalid API key");
  return org;
}

export function notFound(): RequestHandler {
  return (req, _res, next) => next(new ApiError("NOT_FOUND", `No route for ${req.method} ${req.path}`));
}

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  expose?: boolean;
}

/**
 * Any thrown value as the error it answers: ApiError as is; zod →
 * VALIDATION_ERROR; body-parser failures → INVALID_JSON / PAYLOAD_TOO_LARGE;
 * a dependency that is down (Postgres, NATS) → 503 SERVICE_UNAVAILABLE;
 * anything else is logged with its stack and becomes a plain 500, never
 * echoing internals.
 */
export function toApiError(err: unknown, log: Logger, context: { requestId: unknown; path: string }): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof z.ZodError) return ApiError.validation(zodDetails(err));
  // The router could not decode a path parameter (`%ZZ`, a cut `%E0%A4%A`): the path names nothing this API knows.
  if (err instanceof URIError) return new ApiError("VALIDATION_ERROR", "The request path is not valid percent-encoding", [{ path: "url", message: "is not valid percent-encoding" }]);
  const e = err as BodyParserError;
  switch (e?.type) {
    case "entity.parse.failed":
      return new ApiError("INVALID_JSON", "The body is not valid JSON");
    case "entity.too.large":
      return new ApiError("PAYLOAD_TOO_LARGE", "The body is over the size limit");
    case "encoding.not-utf8":
      return new ApiError("INVALID_JSON", "The body is not UTF-8 JSON");
    case "encoding.unsupported":
    case "charset.unsupported":
      // Not a code of the contract's table: the body cannot be read as JSON.
      return new ApiError("INVALID_JSON", "The body is not UTF-8 JSON (unsupported charset or encoding)");
    case "request.aborted":
      return new ApiError("VALIDATION_ERROR", "The request was aborted", [{ path: "body", message: "incomplete body" }]);
    default:
      if (isDependencyDown(err)) {
        log.warn({ err: e?.message, requestId: context.requestId, path: context.path }, "dependency unavailable");
        return ApiError.unavailable();
      }
      if (e?.status && e.status >= 400 && e.status < 500 && e.expose) {
        return new ApiError("VALIDATION_ERROR", "The request could not be read", [{ path: "body", message: e.message }]);
      }
      log.error({ err: { message: e?.message, stack: e?.stack }, requestId: context.requestId, path: context.path }, "unhandled error");
      return new ApiError("INTERNAL_ERROR", "Internal error");
  }
}

/** The one error middleware: the error's envelope (`toApiError`). */
export function errorHandler(log: Logger): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const apiError = toApiError(err, log, { requestId: res.locals.requestId, path: req.path });
    if (res.headersSent) {
      res.end();
      return;
    }
    if (apiError.headers) for (const [k, v] of Object.entries(apiError.headers)) res.setHeader(k, v);
    res.status(apiError.status).json(apiError.toJSON());
  };
}
