import { statusForCode, type ErrorCode } from "@platform/contracts";

export interface ErrorDetail {
  path: string;
  message: string;
}

/** The one throwable of the platform's HTTP layer; the error middleware turns it into the envelope. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "ApiError";
    this.status = statusForCode(code);
  }

  toJSON() {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }

  static validation(details: ErrorDetail[], message = "Request validation failed") {
    return new ApiError("VALIDATION_ERROR", message, details);
  }
  static notFound(what = "Resource") {
    return new ApiError("NOT_FOUND", `${what} not found`);
  }
  /** 402: the organization's plan does not cover the action (contract section 2, Plans). */
  static paymentRequired() {
    return new ApiError("PAYMENT_REQUIRED", "The organization's plan does not cover this action");
  }
  static unavailable(message = "A dependency is unavailable; retry later") {
    return new ApiError("SERVICE_UNAVAILABLE", message);
  }
  /** A request not received whole in time (the client stalled): 400, the contract's status for the code (ADR 0024). */
  static notReceivedInTime() {
    return new ApiError("VALIDATION_ERROR", "The request was not received in time", [{ path: "request", message: "not received whole in time" }]);
  }
}

/** Error envelope as sent on the wire, e.g. from a proxy error handler with no express app. */
export function errorBody(code: ErrorCode, message: string) {
  return JSON.stringify({ error: { code, message } });
}
