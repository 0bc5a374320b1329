/**
 * One HTTP attempt to a webhook: POST, no redirects followed, bounded by the
 * attempt timeout (connect, headers and body together), the answer's body
 * read only as far as the attempt log keeps it. With private targets refused,
 * the connector checks the addresses before connecting (guarded lookup, IP
 * literals) and the address actually connected to (DNS rebinding).
 */
import net from "node:net";
import { Agent, buildConnector } from "undici";
import { WEBHOOK_RESPONSE_BODY_LIMIT } from "@platform/contracts";
import { post, PostTimeoutError, postTarget } from "@platform/runtime";
import { BlockedTargetError, blockedAddressReason, guardedLookup } from "./target-guard";

/** The attempt log keeps this many characters of a response body. */
export const RESPONSE_BODY_LIMIT = WEBHOOK_RESPONSE_BODY_LIMIT;
/** Bytes read from a response, enough for RESPONSE_BODY_LIMIT characters of any UTF-8. */
const READ_LIMIT = 8 * 1024;

export interface SendOutcome {
  ok: boolean;
  status: number | null;
  body: string | null;
  error: string | null;
  durationMs: number;
}

export interface HttpSenderOptions {
  timeoutMs: number;
  allowPrivate: boolean;
}

export class HttpSender {
  private readonly agent: Agent;

  constructor(private readonly opts: HttpSenderOptions) {
    const base = buildConnector({
      timeout: opts.timeoutMs,
      ...(opts.allowPrivate ? {} : { lookup: guardedLookup }),
    } as buildConnector.BuildOptions);
    const connect: buildConnector.connector = opts.allowPrivate
      ? base
      : (options, callback) => {
          const host = options.hostname.replace(/^\[|\]$/g, "");
          if (net.isIP(host)) {
            const reason = blockedAddressReason(host);
            if (reason) return callback(new BlockedTargetError(`blocked target address ${host} (${reason})`), null);
          }
          base(options, (err, socket) => {
            if (err || !socket) return callback(err ?? new Error("connect failed"), null);
            const remote = socket.remoteAddress;
            const reason = remote ? blockedAddressReason(remote) : "unknown address";
            if (reason) {
              socket.destroy();
              return callback(new BlockedTargetError(`blocked target address ${remote ?? "?"} (${reason})`), null);
            }
            callback(null, socket);
          });
        };
    this.agent = new Agent({
      connect,
      keepAliveTimeout: 30_000,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      // One slow endpoint must not starve others of sockets: no global cap here,
      // concurrency is bounded per webhook by the dispatcher.
      connections: null,
    });
  }

  /**
   * One POST. One timer bounds the whole attempt (waiting for a socket,
   * connecting, the response headers; WEBHOOK_TIMEOUT_MS in all): an answer
   * that comes later is a timeout. undici's own timeouts stay as a backstop
   * only: they run on a clock that ticks every half second or so, and alone
   * they let an answer 0.5 s past the timeout count as a success. (A plain
   * timer per attempt costs about a microsecond; an AbortSignal per attempt
   * would cost far more.) The answer's body is read only as far as the attempt
   * log keeps it (`post` of @platform/runtime: no body stream per attempt); a
   * 2xx whose body is still coming at the timeout is a success with an
   * unknown body. `close()` ends every request in flight (shutdown).
   */
  async send(url: string, body: Buffer, headers: Record<string, string>): Promise<SendOutcome> {
    const started = performance.now();
    const durationMs = () => Math.round(performance.now() - started);
    let target: { origin: string; path: string };
    try {
      target = postTarget(url);
    } catch (err) {
      return { ok: false, status: null, body: null, error: describe(err, this.opts.timeoutMs), durationMs: durationMs() };
    }
    const answer = await post(this.agent, target, headers, body, { readLimit: READ_LIMIT, timeoutMs: this.opts.timeoutMs });
    if (answer.status === null) return { ok: false, status: null, body: null, error: describe(answer.error, this.opts.timeoutMs), durationMs: durationMs() };
    const ok = answer.status >= 200 && answer.status < 300;
    // A body that could not be read is only a log detail: the status is what counts. Postgres text cannot hold NUL: it
    // is kept as U+FFFD (as bytes that are not UTF-8 are), or the attempt could not be recorded at all.
    const text = answer.body && truncateChars(answer.body.toString("utf8").replaceAll("\0", "\uFFFD"), RESPONSE_BODY_LIMIT);
    return { ok, status: answer.status, body: text, error: ok ? null : `HTTP ${answer.status}`, durationMs: durationMs() };
  }

  /** Ends every request in flight and closes the connections (shutdown). */
  async close(): Promise<void> {
    if (this.agent.destroyed) return;
    await this.agent.destroy().catch(() => undefined);
  }
}

/** Cuts to `max` characters (code points, so a surrogate pair is never split). */
export function truncateChars(s: string, max: number): string {
  if (s.length <= max) return s;
  return Array.from(s).slice(0, max).join("");
}

function describe(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err instanceof BlockedTargetError || e?.code === "EBLOCKEDTARGET") return e.message ?? "blocked target address";
  if (e?.cause && (e.cause as { code?: string }).code === "EBLOCKEDTARGET") return e.cause.message ?? "blocked target address";
  if (e?.name === "AbortError") return "aborted";
  if (err instanceof PostTimeoutError || e?.code === "UND_ERR_HEADERS_TIMEOUT" || e?.code === "UND_ERR_BODY_TIMEOUT" || e?.code === "UND_ERR_CONNECT_TIMEOUT") {
    return `timeout after ${timeoutMs} ms`;
  }
  const code = e?.code ?? e?.cause?.code;
  return `connection error${code ? ` ${code}` : ""}: ${(e?.message ?? "failed").slice(0, 200)}`;
}
