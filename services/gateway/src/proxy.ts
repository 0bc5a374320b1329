import http from "node:http";
import type { RequestHandler } from "express";
import { createProxyMiddleware } from "http-proxy-middleware";
import { errorBody, INTERNAL_HEADERS } from "@platform/http";
import type { Logger } from "@platform/logging";

/** Headers a client may send that only the gateway is allowed to set. */
const FORGEABLE = [INTERNAL_HEADERS.token, INTERNAL_HEADERS.organization, "x-forwarded-organization"];

/**
 * Forwards a request, path unchanged, to the service that owns it, with the
 * organization the gateway resolved and the internal token. Whatever the
 * client sent in those headers is overwritten; its API key is not forwarded.
 */
export function proxyTo(target: string | undefined, opts: { internalToken: string; timeoutMs: number; log: Logger; service: string }): RequestHandler {
  if (!target) {
    return (_req, res) => {
      res.status(503).type("application/json").send(errorBody("SERVICE_UNAVAILABLE", `The ${opts.service} service is not available`));
    };
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, keepAliveMsecs: 10_000 });
  const proxy = createProxyMiddleware({
    target,
    agent,
    changeOrigin: false,
    xfwd: true,
    proxyTimeout: opts.timeoutMs,
    pathRewrite: (_path, req) => (req as unknown as { originalUrl: string }).originalUrl,
    on: {
      proxyReq: (proxyReq, req) => {
        for (const h of FORGEABLE) proxyReq.removeHeader(h);
        proxyReq.removeHeader("authorization");
        const res = (req as unknown as { res: { locals: Record<string, unknown> } }).res;
        proxyReq.setHeader(INTERNAL_HEADERS.token, opts.internalToken);
        const org = res?.locals?.organizationId;
        if (typeof org === "string") proxyReq.setHeader(INTERNAL_HEADERS.organization, org);
        const requestId = res?.locals?.requestId;
        if (typeof requestId === "string") proxyReq.setHeader(INTERNAL_HEADERS.requestId, requestId);
      },
      error: (err, req, res) => {
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
  return proxy as unknown as RequestHandler;
}
