import { Pool } from "undici";
import {
  buildTemplateBody,
  buildTextBody,
  type MessageBody,
  type TemplateMessageInput,
  type TextMessageInput,
} from "./bodies";
import { classifyResponse, type ProviderResult } from "./result";
import { currentRequestContext } from "@platform/logging";
import { httpClientSpan, tracingEnabled } from "@platform/telemetry";

export interface ProviderClientOptions {
  /** e.g. `https://graph.facebook.com/v21.0` or the simulator's URL; may carry a path prefix. */
  baseUrl: string;
  accessToken: string;
  /** Bounds one call, from sending the request to reading the whole answer. Default 10000. */
  timeoutMs?: number;
  /** Keep-alive sockets to the provider. Default 128. */
  connections?: number;
  /** Called once per call with its result and duration (metrics, e.g. packages/http's `providerCallObserver`). */
  observe?: (result: ProviderResult, seconds: number) => void;
}

export interface SendTextInput extends TextMessageInput {
  phoneNumberId: string;
}

export interface SendTemplateInput extends TemplateMessageInput {
  phoneNumberId: string;
}

export interface ProviderClient {
  sendText(input: SendTextInput): Promise<ProviderResult>;
  sendTemplate(input: SendTemplateInput): Promise<ProviderResult>;
  /** Waits for in-flight calls, then closes the sockets. */
  close(): Promise<void>;
}

export function createProviderClient(options: ProviderClientOptions): ProviderClient {
  const base = new URL(options.baseUrl);
  const pathPrefix = base.pathname.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 10_000;
  // One pool of keep-alive sockets to the one origin: a new TLS/TCP handshake
  // per message would cap us far below the 1,000 sends/s we need.
  const pool = new Pool(base.origin, {
    connections: options.connections ?? 128,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 60_000,
    connect: { timeout: timeoutMs },
  });
  const authorization = `Bearer ${options.accessToken}`;

  const observe = options.observe;
  async function post(phoneNumberId: string, body: MessageBody): Promise<ProviderResult> {
    if (tracingEnabled()) return traced(phoneNumberId, body);
    if (!observe) return call(phoneNumberId, body);
    const started = process.hrtime.bigint();
    const result = await call(phoneNumberId, body);
    observe(result, Number(process.hrtime.bigint() - started) / 1e9);
    return result;
  }

  /**
   * A call under a client span (tracing on), child of the current request's span. The provider is a third
   * party: our `traceparent` is not sent to it (ADR 0011).
   */
  async function traced(phoneNumberId: string, body: MessageBody): Promise<ProviderResult> {
    const span = httpClientSpan("POST", `${base.origin}${pathPrefix}/${phoneNumberId}/messages`, currentRequestContext()?.trace, { "peer.service": "provider" });
    const started = process.hrtime.bigint();
    const result = await call(phoneNumberId, body);
    observe?.(result, Number(process.hrtime.bigint() - started) / 1e9);
    if (result.ok) span.end(200);
    else span.end(result.httpStatus ?? undefined, new Error(`${result.kind} ${result.code}: ${result.title}`));
    return result;
  }

  async function call(phoneNumberId: string, body: MessageBody): Promise<ProviderResult> {
    const controller = new AbortController();
    let timedOut = false;
    // One timer bounds the whole call (connect, headers and body), which the
    // per-phase undici timeouts alone would not.
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    try {
      const res = await pool.request({
        method: "POST",
        path: `${pathPrefix}/${encodeURIComponent(phoneNumberId)}/messages`,
        headers: { authorization, "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      // Always read the body to the end so the socket goes back to the pool.
      const text = await res.body.text();
      return classifyResponse(res.statusCode, text);
    } catch (error) {
      if (timedOut) {
        return { ok: false, kind: "transient", code: "timeout", title: `no answer within ${timeoutMs} ms`, httpStatus: null };
      }
      const e = error as { code?: string; message?: string };
      return {
        ok: false,
        kind: "transient",
        code: "network_error",
        title: [e.code, e.message].filter(Boolean).join(": ") || "request failed",
        httpStatus: null,
      };
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    sendText: (input) => post(input.phoneNumberId, buildTextBody(input)),
    sendTemplate: (input) => post(input.phoneNumberId, buildTemplateBody(input)),
    close: () => pool.close(),
  };
}
