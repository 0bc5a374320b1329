import type { ErrorCode, ErrorEnvelope } from "@platform/contracts";

/** One offending value of a `VALIDATION_ERROR` (the contract's `details[]`). */
export type ApiErrorDetail = NonNullable<ErrorEnvelope["error"]["details"]>[number];

/**
 * An error answer of the API: `{error: {code, message, details?}}` with its HTTP
 * status and the `X-Request-Id` to quote to support. `code` is one of the
 * contract's codes; `UNKNOWN` only when the answer was not the platform's
 * envelope (e.g. a proxy's HTML page in front of the gateway).
 */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly code: ErrorCode | "UNKNOWN";
  readonly details: ApiErrorDetail[] | undefined;
  readonly requestId: string | undefined;
  /** `Retry-After` of the answer in milliseconds, when it had one (429, 503). */
  readonly retryAfterMs: number | undefined;
  readonly headers: Headers;

  constructor(init: {
    status: number;
    code: ErrorCode | "UNKNOWN";
    message: string;
    details?: ApiErrorDetail[];
    requestId?: string;
    retryAfterMs?: number;
    headers?: Headers;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
    this.headers = init.headers ?? new Headers();
  }

  /** Narrowing helper: `if (ApiError.is(err, "CONTACT_OPTED_OUT")) …`. */
  static is(err: unknown, code?: ErrorCode): err is ApiError {
    return err instanceof ApiError && (code === undefined || err.code === code);
  }
}

/** The request never got an HTTP answer (connection refused or reset, timeout) after every retry. */
export class ConnectionError extends Error {
  override readonly name = "ConnectionError";
  constructor(
    message: string,
    override readonly cause: unknown,
  ) {
    super(message);
  }
}
