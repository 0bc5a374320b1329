import { isUtf8 } from "node:buffer";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Request, Response, Router } from "express";
import { withRequestContext, type Logger } from "@platform/logging";
import { httpServerSpan } from "@platform/telemetry";
import { ApiError } from "./errors";
import type { Metrics } from "./metrics";
import { refuseDeepJson } from "./validate";
import { INTERNAL_HEADERS, isInternalToken, logFinished, requestIdFor, toApiError } from "./middleware";

/** A JSON request as a route handler sees it, whichever server read it. */
export interface JsonRequest {
  method: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (`{}` for an empty one), as `express.json` gives it. */
  body: unknown;
  /** Set by the gateway; undefined on calls without an organization. */
  organizationId: string | undefined;
  requestId: string;
  /** True once the caller closed the connection before the answer (the gateway's call timed out, its client left). */
  abandoned(): boolean;
}

/** `abandoned` of a request: its connection closed (node destroys the answer with it) before the answer was written in full. */
function abandonedOf(res: ServerResponse): () => boolean {
  return () => res.destroyed && !res.writableFinished;
}

export interface JsonAnswer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/**
 * A route answered with JSON, written once and served two ways (ADR 0005):
 * by express like any route, and, for the exact method and path with a plain
 * JSON body, by `createServiceListener`'s fast path on node:http, which skips
 * express's router and body parser on the service's hottest requests.
 */
export interface JsonRoute {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  handler(req: JsonRequest): Promise<JsonAnswer>;
}

const JSON_TYPE = "application/json; charset=utf-8";

/** The calling organization (401 when the gateway set none). */
export function organizationFrom(req: JsonRequest): string {
  if (!req.organizationId) throw new ApiError("UNAUTHORIZED", "Invalid API key");
  return req.organizationId;
}

/** A header's value as express's `req.header()` gives it. */
export function headerOf(req: JsonRequest, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(", ") : value;
}

/** Mounts a JSON route on an express router (any path variant express matches: case, trailing slash). */
export function mountJsonRoute(router: Router, route: JsonRoute): void {
  const method = route.method.toLowerCase() as "get" | "post" | "put" | "patch" | "delete";
  router[method](route.path, async (req: Request, res: Response) => {
    const answer = await route.handler({
      method: req.method,
      headers: req.headers,
      body: req.body,
      organizationId: typeof res.locals.organizationId === "string" ? res.locals.organizationId : undefined,
      requestId: String(res.locals.requestId),
      abandoned: abandonedOf(res),
    });
    if (answer.headers) for (const [k, v] of Object.entries(answer.headers)) res.setHeader(k, v);
    res.status(answer.status).json(answer.body);
  });
}

/**
 * True when express would parse this body as JSON exactly as the fast path
 * does: `application/json` in UTF-8, not compressed, with a length within the
 * limit. Anything else (chunked, gzip, another charset, `+json` types) goes to
 * express, which knows every variant.
 */
function plainJson(headers: IncomingHttpHeaders, limit: number): boolean {
  const type = headers["content-type"]?.toLowerCase().replace(/\s+/g, "");
  if (type !== "application/json" && type !== "application/json;charset=utf-8") return false;
  const encoding = headers["content-encoding"];
  if (encoding !== undefined && encoding.toLowerCase() !== "identity") return false;
  if (headers["transfer-encoding"] !== undefined) return false;
  const length = Number(headers["content-length"]);
  return Number.isInteger(length) && length >= 0 && length <= limit;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** `express.json({ strict: false })`'s reading of a UTF-8 body: empty is `{}`, a BOM is dropped. */
function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return {};
  if (!isUtf8(raw)) throw new ApiError("INVALID_JSON", "The body is not UTF-8 JSON");
  let text = raw.toString("utf8");
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError("INVALID_JSON", "The body is not valid JSON");
  }
  refuseDeepJson(body);
  return body;
}

function send(res: ServerResponse, requestId: string, answer: JsonAnswer): void {
  const body = JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    ...answer.headers,
    "X-Request-Id": requestId,
    "Content-Type": JSON_TYPE,
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(body);
}

/**
 * A service's HTTP listener: requests for a fast route (exact method and
 * path, no query, plain JSON body) are answered on node:http with the same
 * checks and answers as the express stack (request id, metrics, internal
 * token, organization header, JSON body, error envelope); every other request
 * goes to `app`.
 */
export function createServiceListener(opts: {
  app: (req: IncomingMessage, res: ServerResponse) => void;
  routes: JsonRoute[];
  internalToken: string;
  bodyLimitBytes: number;
  metrics: Metrics;
  log: Logger;
}): (req: IncomingMessage, res: ServerResponse) => void {
  const { app, internalToken, metrics, log } = opts;
  const byKey = new Map(opts.routes.map((r) => [`${r.method} ${r.path}`, r]));

  const serve = async (req: IncomingMessage, res: ServerResponse, route: JsonRoute, requestId: string) => {
    const given = req.headers[INTERNAL_HEADERS.token];
    if (typeof given !== "string" || !isInternalToken(given, internalToken)) {
      throw new ApiError("UNAUTHORIZED", "Internal token missing or invalid");
    }
    const organization = req.headers[INTERNAL_HEADERS.organization];
    const abandoned = abandonedOf(res);
    const body = parseJson(await readBody(req));
    const answer = await route.handler({
      method: route.method,
      headers: req.headers,
      body,
      organizationId: typeof organization === "string" && organization ? organization : undefined,
      requestId,
      abandoned,
    });
    send(res, requestId, answer);
  };

  return (req, res) => {
    const route = byKey.get(`${req.method} ${req.url}`);
    if (!route || !plainJson(req.headers, opts.bodyLimitBytes)) {
      app(req, res);
      return;
    }
    const given = req.headers[INTERNAL_HEADERS.requestId];
    const requestId = requestIdFor(Array.isArray(given) ? given.join(", ") : given);
    metrics.track(route.method, res, () => route.path);
    const organization = req.headers[INTERNAL_HEADERS.organization];
    const ctx = {
      requestId,
      organizationId: typeof organization === "string" && organization ? organization : undefined,
      trace: httpServerSpan(route.method, req.headers, res, () => route.path),
    };
    logFinished(log, route.method, res, () => route.path, ctx);
    withRequestContext(ctx, () => serve(req, res, route, requestId)).catch((err: unknown) => {
      const apiError = toApiError(err, log, { requestId, path: route.path });
      if (res.headersSent) {
        res.end();
        return;
      }
      send(res, requestId, { status: apiError.status, body: apiError.toJSON(), headers: apiError.headers });
    });
  };
}
