import { Pool } from "undici";
import {
  buildTemplateBody,
  buildTextBody,
  type MessageBody,
  type TemplateMessageInput,
  type TextMessageInput,
} from "./bodies";
import { classifyResponse, CONNECTION_LOST_CODE, UNREADABLE_SUCCESS_CODE, type ProviderFailure, type ProviderResult } from "./result";
import { currentRequestContext } from "@platform/logging";
import { httpClientSpan, tracingEnabled } from "@platform/telemetry";
import { post as postOnce, type PostAnswer } from "@platform/runtime";

export interface ProviderClientOptions {
  /** e.g. `https://graph.facebook.com/v21.0` or the simulator's URL; may carry a path prefix. */
  baseUrl: string;
  accessToken: string;
  /** Bounds one call, from sending the request to reading the whole answer. Default 10000. */
  timeoutMs?: number;
  /**
   * A call sent and still unanswered at `timeoutMs` is answered `timeout` then, and its answer is still read for this
   * much longer: `late` on the result (a provider that took the message and answered late has it). Default 0: none.
   */
  lateAnswerMs?: number;
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
  /** Ends the waits for late answers at once: each `late` is answered `timeout` (a stopping process records none). */
  endLateWaits(): void;
  /** Ends the waits for late answers, waits for in-flight calls, then closes the sockets. */
  close(): Promise<void>;
}

export function createProviderClient(options: ProviderClientOptions): ProviderClient {
  const base = new URL(options.baseUrl);
  const pathPrefix = base.pathname.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 10_000;
  const lateMs = options.lateAnswerMs ?? 0;
  /** The waits for late answers under way: ended by `close`. */
  const lateWaits = new Set<() => void>();
  // One pool of keep-alive sockets to the one origin: a new TLS/TCP handshake
  // per message would cap us far below the 1,000 sends/s we need.
  const pool = new Pool(base.origin, {
    connections: options.connections ?? 128,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 60_000,
    connect: { timeout: timeoutMs },
  });
  const headers = { authorization: `Bearer ${options.accessToken}`, "content-type": "application/json", accept: "application/json" };

  const endLateWaits = (): void => {
    for (const endLate of [...lateWaits]) endLate();
  };

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

  /**
   * One call, bounded as a whole (waiting for a socket, connecting, the headers and the body) by one timer. Through
   * `post` of @platform/runtime: no body stream, abort signal or AsyncResource per call.
   */
  async function call(phoneNumberId: string, body: MessageBody): Promise<ProviderResult> {
    const answer = await postOnce(pool, { origin: base.origin, path: `${pathPrefix}/${encodeURIComponent(phoneNumberId)}/messages` }, headers, JSON.stringify(body), {
      timeoutMs,
      lateMs,
    });
    return resultOf(answer);
  }

  function resultOf(answer: PostAnswer, waited = timeoutMs): ProviderResult {
    if (answer.timedOut) {
      const unanswered: ProviderFailure = { ok: false, kind: "transient", code: "timeout", title: `no answer within ${waited} ms`, httpStatus: null };
      if (answer.late && answer.endLate) {
        const endLate = answer.endLate;
        lateWaits.add(endLate);
        unanswered.late = answer.late.then((late) => {
          lateWaits.delete(endLate);
          return resultOf(late, timeoutMs + lateMs);
        });
      }
      return unanswered;
    }
    if (answer.status === null || answer.body === null) {
      const e = answer.error as { code?: string; message?: string } | null;
      const why = [e?.code, e?.message].filter(Boolean).join(": ") || "request failed";
      // A 2xx whose body was cut off: the provider took the message, its id is lost (as for a 2xx without one).
      if (answer.status !== null && answer.status >= 200 && answer.status < 300) {
        return { ok: false, kind: "transient", code: UNREADABLE_SUCCESS_CODE, title: `provider answered ${answer.status}, its body cut off: ${why}`, httpStatus: answer.status };
      }
      // The request went out and the connection ended before an answer: the provider may have taken it.
      if (answer.sent && answer.status === null) return { ok: false, kind: "transient", code: CONNECTION_LOST_CODE, title: `connection lost before an answer: ${why}`, httpStatus: null };
      return { ok: false, kind: "transient", code: "network_error", title: why, httpStatus: answer.status };
    }
    return classifyResponse(answer.status, answer.body.toString("utf8"));
  }

  return {
    sendText: (input) => post(input.phoneNumberId, buildTextBody(input)),
    sendTemplate: (input) => post(input.phoneNumberId, buildTemplateBody(input)),
    endLateWaits,
    close: () => {
      endLateWaits();
      return pool.close();
    },
  };
}
