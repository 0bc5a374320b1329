import http from "node:http";
import { createProxyMiddleware, debugProxyErrorsPlugin, proxyEventsPlugin } from "http-proxy-middleware";
import { ApiError, errorBody, INTERNAL_HEADERS } from "@platform/http";
import { currentRequestContext, type Logger } from "@platform/logging";
import { httpClientSpan, injectTrace, tracingEnabled, type Context } from "@platform/telemetry";

/** A proxy as plain node:http middleware: usable from express and from the /api/v1 front alike. */
export type ProxyHandler = ((req: http.IncomingMessage, res: http.ServerResponse, next?: (err?: unknown) => void) => void) & {
  /** Calls waiting for the service now (metrics). */
  readonly inFlight?: number;
};

/** What the gateway tells the service: set by the /api/v1 front, or taken from express's `res.locals` on admin routes. */
export interface Forwarded {
  organizationId?: unknown;
  requestId?: unknown;
  /** The trace context of the gateway's server span (the proxy hop's client span is its child). */
  trace?: Context;
  /** The organization's plan does not cover this keyed request: the service answers 402 unless the key has an answer. */
  planRefused?: unknown;
}
export type ForwardedRequest = http.IncomingMessage & {
  forwarded?: Forwarded;
  originalUrl?: string;
  res?: { locals?: Forwarded };
  /** Ends the proxy hop's client span (tracing on). */
  endHop?: (status?: number, err?: unknown) => void;
  /**
   * The call to the service, once http-proxy has made it; whether the client has gone (its response closed); whether
   * the call ran out of `timeoutMs`.
   */
  upstreamCall?: { request?: http.ClientRequest; clientGone: boolean; timedOut?: boolean };
};

/** The W3C trace headers: with tracing on, the gateway replaces the client's with its proxy hop's. */
const TRACE_HEADERS = ["traceparent", "tracestate"];

/** Headers a client may send that only the gateway is allowed to set. */
const FORGEABLE = [INTERNAL_HEADERS.token, INTERNAL_HEADERS.organization, INTERNAL_HEADERS.planRefused, "x-forwarded-organization"];

export interface ProxyOptions {
  internalToken: string;
  timeoutMs: number;
  /** Calls in flight at once to the service (`UPSTREAM_MAX_IN_FLIGHT`); the next ones are answered 503 at once. */
  maxInFlight: number;
  /**
   * Of those, the calls one organization may hold (`UPSTREAM_MAX_IN_FLIGHT_PER_ORGANIZATION`); its next ones are
   * answered 429 RATE_LIMITED at once, so that one organization's slow or stalled calls leave room for the others.
   */
  maxInFlightPerOrganization?: number;
  /** Called for each call refused because `maxInFlight` were in flight (metrics). */
  onBusy?: (service: string) => void;
  /** Called for each call refused because its organization held `maxInFlightPerOrganization` (metrics). */
  onOrganizationBusy?: (service: string) => void;
  log: Logger;
  service: string;
}

/**
 * Forwards a request, path unchanged, to the service that owns it, with the
 * organization the gateway resolved and the internal token. Whatever the
 * client sent in those headers is overwritten; its API key is not forwarded.
 * At most `maxInFlight` calls wait for the service at once: a further one is
 * answered 503 SERVICE_UNAVAILABLE with `Retry-After: 1` rather than queued in
 * memory, so a service that stalls cannot take the gateway's heap with it.
 * One organization holds at most `maxInFlightPerOrganization` of those calls:
 * its next one is answered 429 RATE_LIMITED with `Retry-After: 1`, and the
 * other organizations keep the rest (ADR 0015, addendum).
 */
export function proxyTo(target: string | undefined, opts: ProxyOptions): ProxyHandler {
  if (!target) return (_req, res) => unavailable(res, `The ${opts.service} service is not available`);
  // As many sockets as calls may be in flight: the agent never queues a call in memory either.
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.maxInFlight, keepAliveMsecs: 10_000 });
  const proxy = createProxyMiddleware({
    target,
    agent,
    changeOrigin: false,
    xfwd: true,
    proxyTimeout: opts.timeoutMs,
    // The default plugins minus the logger (a URL built and a line formatted per request, for a no-op logger) and the
    // error page (our `error` handler answers the envelope): the crash guards and the `on` events stay.
    ejectPlugins: true,
    plugins: [debugProxyErrorsPlugin, proxyEventsPlugin],
    // Express strips a mount path from req.url; the service sees the path the client sent.
    pathRewrite: (_path, req) => (req as ForwardedRequest).originalUrl ?? req.url ?? "/",
    on: {
      // Only remembered here (the event can come after the request's headers were sent: nothing may be changed).
      proxyReq: (proxyReq, req) => {
        const call = (req as ForwardedRequest).upstreamCall;
        if (!call) return;
        call.request = proxyReq;
        if (call.clientGone) proxyReq.destroy();
        else proxyReq.once("timeout", () => (call.timedOut = true));
      },
      proxyRes: (proxyRes, req) => {
        // The service answered before the client's body was all read (it refused the call early): the client's
        // connection still carries bytes nobody will read, so it ends after this answer rather than being offered
        // for the client's next call, which would wait behind them and be reset.
        if (!(req as http.IncomingMessage).complete) proxyRes.headers.connection = "close";
        (req as ForwardedRequest).endHop?.(proxyRes.statusCode);
      },
      error: (err, req, res) => {
        const incoming = req as ForwardedRequest;
        incoming.endHop?.(undefined, err);
        // The client left and its call to the service was ended for it: nobody to answer, nothing wrong upstream.
        if (incoming.upstreamCall?.clientGone) return;
        // The call ran out of time while the client had not yet sent its whole body: the client's fault, not the
        // service's: 400 VALIDATION_ERROR, as for a request the gateway itself does not receive in time (createHttpServer).
        const stalled = incoming.upstreamCall?.timedOut === true && !incoming.complete;
        if (stalled) opts.log.info({ upstream: opts.service, path: incoming.url }, "request body not received in time");
        else opts.log.warn({ upstream: opts.service, err: err.message, path: incoming.url }, "upstream service unavailable");
        if (res instanceof http.ServerResponse && !res.headersSent) {
          // A call cut while its body was still being sent: the rest of it stays unread on the connection.
          if (!incoming.complete) res.setHeader("Connection", "close");
          const refusal = stalled ? ApiError.notReceivedInTime() : ApiError.unavailable(`The ${opts.service} service is not available; retry later`);
          const body = JSON.stringify(refusal.toJSON());
          res.writeHead(refusal.status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
          res.end(body);
        } else if (res instanceof http.ServerResponse) {
          res.end();
        } else {
          res.destroy();
        }
      },
    },
  });
  const forward = proxy as unknown as ProxyHandler;
  let inFlight = 0;
  const perOrganization = new Map<string, number>();
  const orgCap = opts.maxInFlightPerOrganization ?? opts.maxInFlight;
  let lastWarned = 0;
  const handler: ProxyHandler = (req, res, next) => {
    const org = organizationOf(req as ForwardedRequest);
    const held = org === undefined ? 0 : perOrganization.get(org) ?? 0;
    if (inFlight >= opts.maxInFlight) {
      opts.onBusy?.(opts.service);
      // One line per second at most: a stalled service would otherwise add a line per refused call.
      if (Date.now() - lastWarned >= 1_000) {
        lastWarned = Date.now();
        opts.log.warn({ upstream: opts.service, inFlight }, "upstream service busy: calls refused with 503");
      }
      unavailable(res, `The ${opts.service} service is busy; retry later`, { "Retry-After": "1" });
      return;
    }
    if (held >= orgCap) {
      opts.onOrganizationBusy?.(opts.service);
      refuse(res, 429, "RATE_LIMITED", "Too many requests", { "Retry-After": "1" });
      return;
    }
    inFlight++;
    if (org !== undefined) perOrganization.set(org, held + 1);
    const call: NonNullable<ForwardedRequest["upstreamCall"]> = { clientGone: false };
    (req as ForwardedRequest).upstreamCall = call;
    // `close` comes once per response: answered, timed out, or left by the client before its answer. A client that
    // left ends its call to the service too (as nginx does by default), so the slot and the pool's socket are free.
    res.once("close", () => {
      inFlight--;
      if (org !== undefined) {
        const left = (perOrganization.get(org) ?? 1) - 1;
        if (left > 0) perOrganization.set(org, left);
        else perOrganization.delete(org);
      }
      if (res.writableFinished) return;
      call.clientGone = true;
      call.request?.destroy();
    });
    setForwardedHeaders(req as ForwardedRequest, target, opts);
    forward(req, res, next);
  };
  return Object.defineProperty(handler, "inFlight", { get: () => inFlight });
}

/** The organization a call is made for: set by the /api/v1 front, or by the admin and console routes. */
function organizationOf(req: ForwardedRequest): string | undefined {
  const org = (req.forwarded ?? req.res?.locals)?.organizationId;
  return typeof org === "string" ? org : undefined;
}

/** Answers 503 SERVICE_UNAVAILABLE with the contract's envelope. */
function unavailable(res: http.ServerResponse, message: string, headers: Record<string, string> = {}): void {
  refuse(res, 503, "SERVICE_UNAVAILABLE", message, headers);
}

/** Answers a call the gateway does not forward with the contract's error envelope. */
function refuse(res: http.ServerResponse, status: number, code: Parameters<typeof errorBody>[0], message: string, headers: Record<string, string> = {}): void {
  const body = errorBody(code, message);
  res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

/**
 * The headers the service gets, set on the incoming request before it is proxied: http-proxy copies them into the
 * outgoing request when it creates it. (Setting them in its `proxyReq` event was too late at times: the event comes
 * with the outgoing socket, and under load the headers had already been sent by then; `removeHeader` threw
 * ERR_HTTP_HEADERS_SENT out of the event, and the gateway exited.) Whatever the client sent in the internal headers is
 * overwritten, its API key is not forwarded.
 */
function setForwardedHeaders(req: ForwardedRequest, target: string, opts: Pick<ProxyOptions, "internalToken" | "service">): void {
  const headers = req.headers;
  for (const h of FORGEABLE) delete headers[h];
  delete headers.authorization;
  const forwarded = req.forwarded ?? req.res?.locals;
  headers[INTERNAL_HEADERS.token] = opts.internalToken;
  const org = organizationOf(req);
  if (org !== undefined) headers[INTERNAL_HEADERS.organization] = org;
  const requestId = forwarded?.requestId;
  if (typeof requestId === "string") headers[INTERNAL_HEADERS.requestId] = requestId;
  if (forwarded?.planRefused === true) headers[INTERNAL_HEADERS.planRefused] = "1";
  // Tracing on: the hop is a client span, child of the gateway's server span, and the service continues it.
  // Off: the client's own traceparent (if any) goes through unchanged.
  if (tracingEnabled()) {
    const hop = httpClientSpan(req.method ?? "GET", `${target}${req.originalUrl ?? req.url ?? "/"}`, forwarded?.trace ?? currentRequestContext()?.trace, { "peer.service": opts.service });
    for (const h of TRACE_HEADERS) delete headers[h];
    injectTrace(hop.context, (name, value) => (headers[name.toLowerCase()] = value));
    req.endHop = (status, err) => {
      req.endHop = undefined;
      hop.end(status, err);
    };
  }
}
