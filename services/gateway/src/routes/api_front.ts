import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, INTERNAL_HEADERS, logFinished, requestIdFor, toApiError, type Metrics } from "@platform/http";
import { withRequestContext, type Logger, type RequestContext } from "@platform/logging";
import { httpServerSpan } from "@platform/telemetry";
import { bearerKey, hashApiKey } from "../auth/api-keys";
import type { AuthCache } from "../auth/key-cache";
import { planRefuses } from "../use-cases/plans";
import { keyedEndpoint, type IdempotencyScopes } from "../use-cases/idempotency-scopes";
import type { ForwardedRequest, ProxyHandler } from "./proxy";
import { rateLimitHeaders, type RateLimiter } from "../rate-limit/limiter";

/** A service's share of /api/v1: every path equal to `prefix` or below it. */
export interface ApiRoute {
  prefix: string;
  proxy: ProxyHandler;
}

const API_ROOT = "/api/v1";
const PING = "/api/v1/ping";
const JSON_TYPE = "application/json; charset=utf-8";

/** True for the requests `createApiFront` answers: `/api/v1` and everything below it (any case, as express matches). */
export function isApiPath(url: string | undefined): boolean {
  if (!url || url.length < API_ROOT.length) return false;
  const head = url.slice(0, API_ROOT.length + 1).toLowerCase();
  return head === API_ROOT || head === `${API_ROOT}/` || head === `${API_ROOT}?`;
}

/**
 * The integrator-facing front of the gateway, `/api/v1/*`, on node:http
 * rather than express (ADR 0004): API key → organization (cached), the
 * organization's token bucket with the RateLimit headers on every answer,
 * the plan rule, then `GET /api/v1/ping` answered here and everything else
 * streamed to its service by http-proxy-middleware. Same answers as the
 * express stack gave, at a fraction of its cost per request; the admin API,
 * probes, metrics, OpenAPI and provider webhooks stay on express.
 */
export function createApiFront(deps: {
  cache: AuthCache;
  limiter: RateLimiter;
  routes: ApiRoute[];
  metrics: Metrics;
  log: Logger;
  /** The organization-wide scope of `Idempotency-Key` (ADR 0021). */
  idempotency: IdempotencyScopes;
}): (req: IncomingMessage, res: ServerResponse) => void {
  const { cache, limiter, metrics, log, idempotency } = deps;
  const routes = deps.routes.map((r) => ({ ...r, prefix: `${API_ROOT}${r.prefix}`.toLowerCase() }));

  const rejected = metrics.counter("gateway_rate_limit_rejections_total", "Requests refused with 429 by an organization's rate limit", ["plan"]);

  const handle = async (req: IncomingMessage, res: ServerResponse, path: string, requestId: string, route: { label: string }, ctx: RequestContext) => {
    const key = bearerKey(req.headers.authorization);
    if (!key) throw unauthorized();
    const principal = await cache.principal(hashApiKey(key));
    if (!principal) throw unauthorized();
    const org = await cache.organization(principal.organizationId);
    if (!org) throw unauthorized();
    ctx.organizationId = org.id;

    const decision = limiter.take(org.id, org.rateLimit);
    for (const [name, value] of Object.entries(rateLimitHeaders(org.rateLimit, decision))) res.setHeader(name, value);
    if (!decision.allowed) {
      rejected.inc({ plan: org.plan });
      throw new ApiError("RATE_LIMITED", "Too many requests", undefined, { "Retry-After": String(decision.retryAfterSeconds) });
    }

    const lower = path.toLowerCase();
    if (lower === PING || lower === `${PING}/`) {
      if (req.method !== "GET" && req.method !== "HEAD") throw noRoute(req, path);
      route.label = PING;
      const body = JSON.stringify({ ok: true, organizationId: org.id });
      res.writeHead(200, { "Content-Type": JSON_TYPE, "Content-Length": Buffer.byteLength(body) });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    const target = routes.find((r) => lower === r.prefix || lower.startsWith(`${r.prefix}/`));
    if (!target) throw noRoute(req, path);
    route.label = target.prefix;
    const keyed = keyedEndpoint(req.method, lower);
    const planRefused = planRefuses(org.plan, req.method ?? "GET", lower, keyed, req.headers["idempotency-key"]);
    if (keyed && req.headers["idempotency-key"] !== undefined) await idempotency.check(org.id, keyed, req.headers["idempotency-key"]);
    (req as ForwardedRequest).forwarded = { organizationId: org.id, requestId, trace: ctx.trace, planRefused };
    target.proxy(req, res);
  };

  return (req, res) => {
    let url = req.url ?? "/";
    const q = url.indexOf("?");
    let path = q < 0 ? url : url.slice(0, q);
    // Repeated slashes are one, here and for the service: express routers match `/templates//send` as
    // `/templates/send`, so the plan rule and the routing must read the same path the service will.
    if (path.includes("//")) {
      path = path.replace(/\/{2,}/g, "/");
      req.url = url = path + (q < 0 ? "" : url.slice(q));
    }
    const route = { label: "unmatched" };
    metrics.track(req.method ?? "GET", res, () => route.label);
    const requestId = requestIdFor(req.headers[INTERNAL_HEADERS.requestId]);
    res.setHeader("X-Request-Id", requestId);
    // Answers carry an organization's data (or say whether a key works): no cache may keep them.
    res.setHeader("Cache-Control", "no-store");
    const ctx: RequestContext = { requestId, trace: httpServerSpan(req.method, req.headers, res, () => route.label) };
    logFinished(log, req.method, res, () => path, ctx);
    withRequestContext(ctx, () => handle(req, res, path, requestId, route, ctx)).catch((err: unknown) => sendError(res, err, log, path));
  };
}

const unauthorized = () => new ApiError("UNAUTHORIZED", "Invalid API key");
const noRoute = (req: IncomingMessage, path: string) => new ApiError("NOT_FOUND", `No route for ${req.method} ${path}`);

/**
 * The error envelope, as the express error middleware writes it, through the
 * same mapping (`toApiError`): Postgres or NATS being down (a cold key cache
 * cannot verify a key without the database) is 503 SERVICE_UNAVAILABLE.
 */
export function sendError(res: ServerResponse, err: unknown, log: Logger, path: string): void {
  const apiError = toApiError(err, log, { requestId: res.getHeader("X-Request-Id"), path });
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify(apiError.toJSON());
  res.writeHead(apiError.status, { ...apiError.headers, "Content-Type": JSON_TYPE, "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}
