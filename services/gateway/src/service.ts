import type { RequestListener } from "node:http";
import express, { type Express, type RequestHandler } from "express";
import type { DataSource } from "typeorm";
import { OutboxRelay, type Bus } from "@platform/bus";
import { pingDatabase } from "@platform/db";
import { ApiError, CursorCodec, createMetrics, instrumentBus, instrumentOutbox, errorHandler, healthRoutes, jsonBody, notFound, refuseNulInUrl, requestId, type Metrics } from "@platform/http";
import type { Logger } from "@platform/logging";
import { createApiFront, isApiPath } from "./routes/api_front";
import { checkOrigin, consoleSession, writesNeed } from "./auth/console";
import { adminAuth } from "./auth/middleware";
import { AuthCache } from "./auth/key-cache";
import type { GatewayEnv } from "./env";
import { planRefuses } from "./use-cases/plans";
import { proxyTo } from "./routes/proxy";
import { RateLimiter } from "./rate-limit/limiter";
import { instrumentRateLimitSync } from "./rate-limit/metrics";
import { registerAdminApiKeys } from "./routes/admin_api_keys";
import { registerAdminOrganizations } from "./routes/admin_organizations";
import { registerAdminUsers } from "./routes/admin_users";
import { registerConsoleApi } from "./routes/console_api";
import { registerConsoleApp } from "./routes/console_app";
import { registerConsoleSession, registerConsoleSignOut } from "./routes/console_session";
import { registerOpenApi } from "./routes/openapi";
import { createProviderFront, isPlainProviderPost, registerProviderWebhooks } from "./routes/provider_webhooks";
import { ApiKeys } from "./use-cases/api-keys";
import { ConsoleSessions } from "./use-cases/console-sessions";
import { IdempotencyScopes, keyedEndpoint } from "./use-cases/idempotency-scopes";
import { listenToBroadcasts } from "./bus/broadcasts";
import { ConsoleUsers } from "./use-cases/console-users";
import { Organizations } from "./use-cases/organizations";

export { envSchema, type GatewayEnv } from "./env";
export { definitionEntities, definitionMigrations } from "./db/definition";

export interface GatewayDeps {
  env: GatewayEnv;
  log: Logger;
  db: DataSource;
  bus: Bus;
  metrics?: Metrics;
  /** The rate limiter's clock (ms, monotonic); default `performance.now`. Tests pass a manual one. */
  clock?: () => number;
}

export interface Gateway {
  /** The server's request listener: `/api/v1/*` and the provider's plain batches to their node:http fronts, the rest to `app`. */
  listener: RequestListener;
  /** Express: probes, metrics, OpenAPI, the provider's handshake (and its batches sent otherwise), the admin API and the 404 envelope. */
  app: Express;
  cache: AuthCache;
  limiter: RateLimiter;
  sessions: ConsoleSessions;
  idempotency: IdempotencyScopes;
  stop(): Promise<void>;
}

/** Service → the URL prefixes it owns under /api/v1 and /admin/v1/organizations/:orgId. */
const ROUTES: Array<{ service: keyof GatewayEnv & `${string}_URL`; name: string; api: string[]; admin: string[] }> = [
  { service: "MESSAGING_URL", name: "messaging", api: ["/messages", "/conversations"], admin: ["channels"] },
  { service: "CONTACTS_URL", name: "contacts", api: ["/contacts", "/opt-outs"], admin: ["opt-outs"] },
  { service: "TEMPLATE_JOBS_URL", name: "template-jobs", api: ["/templates"], admin: ["templates", "template-jobs"] },
  { service: "ANALYTICS_URL", name: "analytics", api: ["/analytics"], admin: [] },
  { service: "WEBHOOK_DISPATCHER_URL", name: "webhook-dispatcher", api: [], admin: ["webhooks"] },
];

/**
 * The console's routes served by a service: `/console/api{prefix}…` goes to the service's own admin or
 * /api/v1 route for the session's organization (path built from it, organization header set from it).
 * More specific prefixes first.
 */
export const CONSOLE_PROXIED: Array<{
  prefix: string;
  service: string;
  upstream: (orgId: string) => string;
  /** A plain `GET {prefix}` (the list) goes here instead, when the service lists them on another route. */
  list?: (orgId: string) => string;
}> = [
  { prefix: "/channels", service: "messaging", upstream: (o) => `/admin/v1/organizations/${o}/channels` },
  { prefix: "/webhooks", service: "webhook-dispatcher", upstream: (o) => `/admin/v1/organizations/${o}/webhooks` },
  { prefix: "/templates", service: "template-jobs", upstream: (o) => `/admin/v1/organizations/${o}/templates` },
  /** Jobs by id (get, cancel) and creation: the /api/v1 routes; the list (newest first, with progress): the admin route. */
  {
    prefix: "/template-jobs",
    service: "template-jobs",
    upstream: () => "/api/v1/templates/send",
    list: (o) => `/admin/v1/organizations/${o}/template-jobs`,
  },
  /** `{action: "clear" | "set", messagingChannelId, phone}`: the /api/v1 opt-out route. */
  { prefix: "/opt-outs/actions", service: "contacts", upstream: () => "/api/v1/opt-outs" },
  /** Added by hand (POST, source `manual`); `GET ?phone=` looks the number up on every channel. */
  { prefix: "/opt-outs", service: "contacts", upstream: (o) => `/admin/v1/organizations/${o}/opt-outs` },
  { prefix: "/contacts", service: "contacts", upstream: () => "/api/v1/contacts" },
  { prefix: "/conversations", service: "messaging", upstream: () => "/api/v1/conversations" },
  { prefix: "/analytics", service: "analytics", upstream: () => "/api/v1/analytics" },
];

export function createGateway(deps: GatewayDeps): Gateway {
  const { env, log, db, bus } = deps;
  const defaults = { perSecond: env.RATE_LIMIT_PER_SECOND, burst: env.RATE_LIMIT_BURST };
  const cache = new AuthCache(db, defaults, log);
  const limiter = new RateLimiter(env.REPLICA_ID ?? `gw-${process.pid}-${Math.random().toString(36).slice(2, 8)}`, bus, undefined, deps.clock);
  const organizations = new Organizations(db, bus, defaults, cache);
  const apiKeys = new ApiKeys(db, bus, cache, env.INTERNAL_TOKEN);
  const users = new ConsoleUsers(db, env.CONSOLE_SCRYPT_COST, env.INTERNAL_TOKEN);
  const sessions = new ConsoleSessions(db, users, {
    ttlSeconds: env.CONSOLE_SESSION_TTL_SECONDS,
    perEmail: env.CONSOLE_SIGN_IN_PER_EMAIL,
    perIp: env.CONSOLE_SIGN_IN_PER_IP,
    windowSeconds: env.CONSOLE_SIGN_IN_WINDOW_SECONDS,
    scryptCost: env.CONSOLE_SCRYPT_COST,
  });
  const metrics = deps.metrics ?? createMetrics("gateway");

  listenToBroadcasts(bus, cache);
  cache.startUsageFlush();
  sessions.startSweeper(undefined, (err) => log.warn({ err: err.message }, "console session sweep failed"));
  const idempotency = new IdempotencyScopes(db);
  idempotency.startSweeper(undefined, (err) => log.warn({ err: err.message }, "idempotency key sweep failed"));
  limiter.start();
  const relay = new OutboxRelay({ databaseUrl: env.DATABASE_URL, schema: "gateway", bus, log });
  relay.start();
  instrumentBus(metrics, bus);
  instrumentOutbox(metrics, "gateway", relay);
  instrumentRateLimitSync(metrics, limiter);

  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "extended");
  app.use(requestId(log));

  const upstreams = ROUTES.filter((r) => env[r.service]).map((r) => ({ name: r.name, url: env[r.service] as string }));
  app.use(
    healthRoutes({
      postgres: () => pingDatabase(db),
      nats: () => bus.ping(),
      ...Object.fromEntries(upstreams.map((u) => [u.name, () => probe(`${u.url}/readyz`)])),
    }),
  );
  app.use(metrics.router);
  app.use(metrics.middleware);

  const publicRouter = express.Router();
  registerOpenApi(publicRouter);
  registerProviderWebhooks(publicRouter, { bus, appSecret: env.PROVIDER_APP_SECRET, verifyToken: env.PROVIDER_VERIFY_TOKEN, log });
  registerConsoleApp(publicRouter);
  app.use(publicRouter);

  // One proxy (one keep-alive pool) per service, shared by its admin and API routes.
  const upstreamBusy = metrics.counter("gateway_upstream_busy_total", "Calls answered 503 because their service already had UPSTREAM_MAX_IN_FLIGHT calls in flight", ["service"]);
  const organizationBusy = metrics.counter(
    "gateway_upstream_organization_busy_total",
    "Calls answered 429 because their organization already had UPSTREAM_MAX_IN_FLIGHT_PER_ORGANIZATION calls in flight to the service",
    ["service"],
  );
  const proxyOpts = {
    internalToken: env.INTERNAL_TOKEN,
    timeoutMs: env.UPSTREAM_TIMEOUT_MS,
    maxInFlight: env.UPSTREAM_MAX_IN_FLIGHT,
    maxInFlightPerOrganization: env.UPSTREAM_MAX_IN_FLIGHT_PER_ORGANIZATION ?? Math.ceil((env.UPSTREAM_MAX_IN_FLIGHT * 3) / 4),
    onBusy: (service: string) => upstreamBusy.inc({ service }),
    onOrganizationBusy: (service: string) => organizationBusy.inc({ service }),
    log,
  };
  const proxies = new Map(ROUTES.map((r) => [r.name, proxyTo(env[r.service] as string | undefined, { ...proxyOpts, service: r.name })]));
  // A series per service from the start (0), so rates and alerts see it before the first refusal.
  for (const route of ROUTES) {
    upstreamBusy.inc({ service: route.name }, 0);
    organizationBusy.inc({ service: route.name }, 0);
  }
  metrics.gauge("gateway_upstream_in_flight", "Proxied calls waiting for each service now (at most UPSTREAM_MAX_IN_FLIGHT)", ["service"], function () {
    for (const [service, proxy] of proxies) this.set({ service }, proxy.inFlight ?? 0);
  });

  // --- /admin/v1 --------------------------------------------------------
  app.use("/admin/v1", noStore, adminAuth(env.ADMIN_TOKEN), refuseNulInUrl());
  const admin = express.Router();
  for (const route of ROUTES) {
    for (const resource of route.admin) {
      admin.use(`/admin/v1/organizations/:orgId/${resource}`, withOrganization(organizations), proxies.get(route.name)! as unknown as RequestHandler);
    }
  }
  admin.use("/admin/v1", jsonBody("1mb"));
  registerAdminOrganizations(admin, { organizations, cursors: new CursorCodec(env.INTERNAL_TOKEN, "organizations") });
  registerAdminApiKeys(admin, { apiKeys, organizations });
  registerAdminUsers(admin, { users, organizations });
  app.use(admin);

  // --- /console/api (issue 15, ADR 0009) ----------------------------------
  app.use("/console/api", noStore, refuseNulInUrl(), checkOrigin(env.CONSOLE_ORIGINS));
  const consolePublic = express.Router();
  consolePublic.use(["/console/api/session", "/console/api/invitations/accept"], jsonBody("64kb"));
  registerConsoleSession(consolePublic, { sessions, users, ttlSeconds: env.CONSOLE_SESSION_TTL_SECONDS });
  app.use(consolePublic);
  app.use("/console/api", consoleSession(sessions));
  const signOut = express.Router();
  registerConsoleSignOut(signOut, { sessions });
  app.use(signOut);
  app.use("/console/api", writesNeed("owner", "admin"));
  for (const route of CONSOLE_PROXIED) {
    const proxy = proxies.get(route.service)!;
    app.use(`/console/api${route.prefix}`, async (req, res, next) => {
      // Express stripped the mount path; the proxy forwards `originalUrl`, rebuilt for the session's organization.
      const rest = req.url === "/" ? "" : req.url.startsWith("/?") ? req.url.slice(1) : req.url;
      // The path's organization is the session's alone: no dot segment or encoded separator may climb out of it.
      if (DOT_SEGMENT.test(rest.split("?")[0])) throw ApiError.notFound("Route");
      const orgId = res.locals.organizationId as string;
      const isList = req.method === "GET" && (rest === "" || rest.startsWith("?"));
      req.originalUrl = (isList && route.list ? route.list(orgId) : route.upstream(orgId)) + rest;
      // The organization's plan covers the console's actions as it covers the API's: a starter organization creates
      // no template job here either, an inactive one only reads (contract section 2, Plans).
      const org = await cache.organization(orgId);
      if (!org) throw ApiError.notFound("Organization");
      const upstreamPath = req.originalUrl.split("?")[0].replace(/\/{2,}/g, "/");
      // A key the console sends is the organization's too (ADR 0021).
      const keyed = keyedEndpoint(req.method, upstreamPath.toLowerCase());
      res.locals.planRefused = planRefuses(org.plan, req.method, upstreamPath, keyed, req.headers["idempotency-key"]);
      if (keyed && req.headers["idempotency-key"] !== undefined) await idempotency.check(orgId, keyed, req.headers["idempotency-key"]);
      proxy(req, res, next);
    });
  }
  const consoleApi = express.Router();
  consoleApi.use("/console/api", jsonBody("1mb"));
  registerConsoleApi(consoleApi, { users, apiKeys, organizations });
  app.use(consoleApi);

  app.use(notFound());
  app.use(errorHandler(log));

  // --- /api/v1 ----------------------------------------------------------
  const apiFront = createApiFront({
    cache,
    limiter,
    metrics,
    log,
    idempotency,
    routes: ROUTES.flatMap((r) => r.api.map((prefix) => ({ prefix, proxy: proxies.get(r.name)! }))),
  });

  // --- POST /provider/webhooks -------------------------------------------
  const providerFront = createProviderFront({ bus, appSecret: env.PROVIDER_APP_SECRET, log, metrics });

  return {
    listener: (req, res) => (isApiPath(req.url) ? apiFront(req, res) : isPlainProviderPost(req) ? providerFront(req, res) : app(req, res)),
    app,
    cache,
    limiter,
    sessions,
    idempotency,
    stop: async () => {
      limiter.stop();
      sessions.stopSweeper();
      idempotency.stopSweeper();
      await cache.stop();
      await relay.stop();
    },
  };
}

const DOT_SEGMENT = /(^|\/)\.{1,2}(\/|$)|%2e|%2f|%5c|\\/i;

/** Admin answers hold API keys and webhook secrets (shown once): no cache may keep them. */
const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader("Cache-Control", "no-store");
  next();
};

/** Admin routes of a service: the organization must exist; the service gets its id from the gateway. */
function withOrganization(organizations: Organizations): RequestHandler {
  return async (req, res, next) => {
    const org = await organizations.get(String(req.params.orgId));
    res.locals.organizationId = org.id;
    next();
  };
}

async function probe(url: string): Promise<void> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1_500) });
  if (!res.ok) throw new Error(`${res.status}`);
  await res.arrayBuffer();
}

