import { ApiError, ConnectionError } from "./errors";

export interface RetryOptions {
  /** Retries after the first attempt (default 3; 0 disables retrying). */
  maxRetries?: number;
  /** First backoff step in ms (default 500); step n is `baseDelayMs * 2^n`, fully jittered. */
  baseDelayMs?: number;
  /** Upper bound of one wait in ms (default 30 000). A `Retry-After` longer than this is not waited for: the error is thrown. */
  maxDelayMs?: number;
  /** HTTP statuses retried (default `[429, 503]`). */
  statuses?: number[];
  /** Retry requests that got no answer at all (connection reset, timeout) when they are safe to repeat (default true). */
  onConnectionError?: boolean;
}

/** What the client decided before a retry: handed to `onRetry` (logging, metrics, tests). */
export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry. */
  attempt: number;
  delayMs: number;
  /** The status that caused the retry; undefined after a connection error. */
  status?: number;
  retryAfterMs?: number;
  error?: unknown;
  idempotencyKey?: string;
}

export interface ResponseInfo {
  method: string;
  path: string;
  attempt: number;
  status: number;
  headers: Headers;
  requestId?: string;
  /** True when the API answered a repeated `Idempotency-Key` with the first answer (`Idempotent-Replayed: true`). */
  replayed: boolean;
  idempotencyKey?: string;
}

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  retry?: RetryOptions;
  /** Per-attempt timeout in ms (default 30 000). */
  timeoutMs?: number;
  /** Extra headers on every request (e.g. `User-Agent`). */
  headers?: Record<string, string>;
  /** A fetch implementation (default the global `fetch` of Node ≥ 20). */
  fetch?: typeof fetch;
  /** Makes the `Idempotency-Key` of a send that has none (default `crypto.randomUUID()`). */
  idempotencyKey?: () => string;
  onRetry?: (info: RetryInfo) => void;
  onResponse?: (info: ResponseInfo) => void;
  /** Random source of the jitter, in [0, 1) (default `Math.random`). */
  random?: () => number;
}

export interface RequestOptions {
  /** Cancels the request and its retries. */
  signal?: AbortSignal;
  /** Overrides the client's per-attempt timeout. */
  timeoutMs?: number;
}

export interface SendOptions extends RequestOptions {
  /** The `Idempotency-Key` (1 to 255 characters); one is made when absent. Reused by every retry of this call. */
  idempotencyKey?: string;
}

export interface Request {
  method: "GET" | "POST";
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  idempotencyKey?: string;
  /** Repeating it changes nothing (GET, keyed sends, opt-out set/clear, cancel): retried after a connection error. */
  safeToRepeat: boolean;
  options?: RequestOptions;
}

export interface Answer<T> {
  data: T;
  status: number;
  headers: Headers;
  requestId?: string;
  replayed: boolean;
  idempotencyKey?: string;
}

const DEFAULTS = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 30_000, statuses: [429, 503], onConnectionError: true };

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * The wait before retry `attempt` (1-based): full jitter over `baseDelayMs * 2^(attempt-1)`
 * capped at `maxDelayMs`, and never shorter than the server's `Retry-After`.
 */
export function backoffDelay(attempt: number, retryAfterMs: number | undefined, opts: Required<Pick<RetryOptions, "baseDelayMs" | "maxDelayMs">>, random: () => number): number {
  const ceiling = Math.min(opts.maxDelayMs, opts.baseDelayMs * 2 ** (attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return Math.min(opts.maxDelayMs, Math.max(retryAfterMs ?? 0, jittered));
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export class Transport {
  private readonly baseUrl: string;
  private readonly retry: typeof DEFAULTS;
  private readonly fetchImpl: typeof fetch;
  private readonly random: () => number;

  constructor(private readonly opts: TransportOptions) {
    if (!opts.apiKey) throw new TypeError("apiKey is required");
    if (!opts.baseUrl) throw new TypeError("baseUrl is required");
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.retry = { ...DEFAULTS, ...opts.retry };
    this.fetchImpl = opts.fetch ?? globalThis.fetch;
    this.random = opts.random ?? Math.random;
  }

  newIdempotencyKey(): string {
    return this.opts.idempotencyKey ? this.opts.idempotencyKey() : globalThis.crypto.randomUUID();
  }

  url(path: string, query?: Request["query"]): string {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url.toString();
  }

  async request<T>(req: Request): Promise<Answer<T>> {
    const headers: Record<string, string> = {
      Accept: "application/json",
      ...this.opts.headers,
      Authorization: `Bearer ${this.opts.apiKey}`,
    };
    let body: string | undefined;
    if (req.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(req.body);
    }
    if (req.idempotencyKey !== undefined) headers["Idempotency-Key"] = req.idempotencyKey;
    const url = this.url(req.path, req.query);
    const userSignal = req.options?.signal;
    const timeoutMs = req.options?.timeoutMs ?? this.opts.timeoutMs ?? 30_000;

    for (let attempt = 0; ; attempt++) {
      const signal = userSignal ? AbortSignal.any([userSignal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
      let res: Response;
      let text: string;
      try {
        res = await this.fetchImpl(url, { method: req.method, headers, body, signal });
        text = await res.text();
      } catch (error) {
        if (userSignal?.aborted) throw userSignal.reason;
        if (req.safeToRepeat && this.retry.onConnectionError && attempt < this.retry.maxRetries) {
          const delayMs = backoffDelay(attempt + 1, undefined, this.retry, this.random);
          this.opts.onRetry?.({ method: req.method, path: req.path, attempt: attempt + 1, delayMs, error, idempotencyKey: req.idempotencyKey });
          await sleep(delayMs, userSignal);
          continue;
        }
        throw new ConnectionError(`${req.method} ${req.path}: ${(error as Error)?.message ?? String(error)}`, error);
      }

      const requestId = res.headers.get("x-request-id") ?? undefined;
      const replayed = res.headers.get("idempotent-replayed") === "true";
      this.opts.onResponse?.({ method: req.method, path: req.path, attempt, status: res.status, headers: res.headers, requestId, replayed, idempotencyKey: req.idempotencyKey });
      if (res.ok) {
        const data = (text === "" ? undefined : JSON.parse(text)) as T;
        return { data, status: res.status, headers: res.headers, requestId, replayed, idempotencyKey: req.idempotencyKey };
      }

      const error = toApiError(res, text, requestId);
      // A send still in progress under the same key (409 IDEMPOTENCY_KEY_IN_USE) is answered once it has finished.
      const retryable = this.retry.statuses.includes(res.status) || (req.idempotencyKey !== undefined && error.code === "IDEMPOTENCY_KEY_IN_USE");
      const tooLong = error.retryAfterMs !== undefined && error.retryAfterMs > this.retry.maxDelayMs;
      if (!retryable || tooLong || attempt >= this.retry.maxRetries) throw error;
      const delayMs = backoffDelay(attempt + 1, error.retryAfterMs, this.retry, this.random);
      this.opts.onRetry?.({
        method: req.method,
        path: req.path,
        attempt: attempt + 1,
        delayMs,
        status: res.status,
        retryAfterMs: error.retryAfterMs,
        error,
        idempotencyKey: req.idempotencyKey,
      });
      await sleep(delayMs, userSignal);
    }
  }
}

function toApiError(res: Response, text: string, requestId: string | undefined): ApiError {
  const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
  let envelope: { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined;
  try {
    envelope = JSON.parse(text);
  } catch {
    envelope = undefined;
  }
  const e = envelope?.error;
  if (e && typeof e.code === "string" && typeof e.message === "string") {
    return new ApiError({
      status: res.status,
      code: e.code as ApiError["code"],
      message: e.message,
      details: Array.isArray(e.details) ? (e.details as ApiError["details"]) : undefined,
      requestId,
      retryAfterMs,
      headers: res.headers,
    });
  }
  return new ApiError({
    status: res.status,
    code: "UNKNOWN",
    message: `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`,
    requestId,
    retryAfterMs,
    headers: res.headers,
  });
}
