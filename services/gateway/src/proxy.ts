import http from "node:http";
import { createProxyMiddleware, debugProxyErrorsPlugin, proxyEventsPlugin } from "http-proxy-middleware";
import { errorBody, INTERNAL_HEADERS } from "@platform/http";
import { currentRequestContext, type Logger } from "@platform/logging";
import { httpClientSpan, injectTrace, tracingEnabled, type Context } from "@platform/telemetry";

/** A proxy as plain node:http middleware: usable from express and from the /api/v1 front alike. */
export type ProxyHandler = (req: http.IncomingMessage, res: http.ServerResponse, next?: (err?: unknown) => void) => void;

/** What the gateway tells the service: set by the /api/v1 front, or taken from express's `res.locals` on admin routes. */
export interface Forwarded {
  organizationId?: unknown;
  requestId?: unknown;
  /** The trace context of the gateway's server span (the proxy hop's client span is its child). */
  trace?: Context;
}
export type ForwardedRequest = http.IncomingMessage & {
  forwarded?: Forwarded;
  originalUrl?: string;
  res?: { locals?: Forwarded };
  /** Ends the proxy hop's client span (tracing on). */
  endHop?: (status?: number, err?: unknown) => void;
};

/** The W3C trace headers: with tracing on, the gateway replaces the client's with its proxy hop's. */
const TRACE_HEADERS = ["traceparent", "tracestate"];

/** Headers a client may send that only the gateway is allowed to set. */
const FORGEABLE = [INTERNAL_HEADERS.token, INTERNAL_HEADERS.organization, "x-forwarded-organization"];

/**
 * Forwards a request, path unchanged, to the service that owns it, with the
 * organization the gateway resolved and the internal token. Whatever the
 * client sent in those headers is overwritten; its API key is not forwarded.
 */
export function proxyTo(target: string | undefined, opts: { internalToken: string; timeoutMs: number; log: Logger; service: string }): ProxyHandler {
  if (!target) {
    return (_req, res) => {
      res.writeHead(503, { "Content-Type": "application/json; charset=utf-8" });
      res.end(errorBody("SERVICE_UNAVAILABLE", `The ${opts.service} service is not available`));
    };
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, keepAliveMsecs: 10_000 });
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
      proxyRes: (proxyRes, req) => (req as ForwardedRequest).endHop?.(proxyRes.statusCode),
      error: (err, req, res) => {
        (req as ForwardedRequest).endHop?.(undefined, err);
        opts.log.warn({ service: opts.service, err: err.message, path: (req as http.IncomingMessage).url }, "upstream service unavailable");
        if (res instanceof http.ServerResponse && !res.headersSent) {
          res.writeHead(503, { "Content-Type": "application/json" });
          res.end(errorBody("SERVICE_UNAVAILABLE", `The ${opts.service} service is not available; retry later`));
        } else if (res instanceof http.ServerResponse) {
          res.end();
        } else {
          res.destroy();
        }
      },
    },
  });
  const forward = proxy as unknown as ProxyHandler;
  return (req, res, next) => {
    setForwardedHeaders(req as ForwardedRequest, target, opts);
    forward(req, res, next);
  };
}

/**
 * The headers the service gets, set on the incoming request before it is proxied: http-proxy copies them into the
 * outgoing request when it creates it. (Setting them in its `proxyReq` event was too late at times: the event comes
 * with the outgoing socket, and under load the headers had already been sent by then; `removeHeader` threw
 * ERR_HTTP_HEADERS_SENT out of the event, and the gateway exited.) Whatever the client sent in the internal headers is
 * overwritten, its API key is not forwarded.
 */
function setForwardedHeaders(req: ForwardedRequest, target: string, opts: { internalToken: string; service: string }): void {
  const headers = req.headers;
  for (const h of FORGEABLE) delete headers[h];
  delete headers.authorization;
  const forwarded = req.forwarded ?? req.res?.locals;
  headers[INTERNAL_HEADERS.token] = opts.internalToken;
  const org = forwarded?.organizationId;
  if (typeof org === "string") headers[INTERNAL_HEADERS.organization] = org;
  const requestId = forwarded?.requestId;
  if (typeof requestId === "string") headers[INTERNAL_HEADERS.requestId] = requestId;
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
