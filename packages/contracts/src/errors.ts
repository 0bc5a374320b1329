import { z } from "zod";

/** The closed list of error codes of the contract (section 2). */
export const ErrorCode = z.enum([
  "VALIDATION_ERROR",
  "INVALID_JSON",
  "INVALID_CURSOR",
  "OUTSIDE_SERVICE_WINDOW",
  "UPSTREAM_REJECTED",
  "UNAUTHORIZED",
  "PAYMENT_REQUIRED",
  "CONTACT_OPTED_OUT",
  "PROVIDER_NOT_CONNECTED",
  "TEMPLATE_NOT_APPROVED",
  "FORBIDDEN",
  "CHANNEL_NOT_FOUND",
  "TEMPLATE_NOT_FOUND",
  "NOT_FOUND",
  "CONFLICT",
  "IDEMPOTENCY_KEY_IN_USE",
  "PAYLOAD_TOO_LARGE",
  "IDEMPOTENCY_KEY_REUSED",
  "RATE_LIMITED",
  "INTERNAL_ERROR",
  "SERVICE_UNAVAILABLE",
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

/** One exhaustive switch from code to HTTP status: adding a code without a status fails to compile. */
export function statusForCode(code: ErrorCode): number {
  switch (code) {
    case "VALIDATION_ERROR":
    case "INVALID_JSON":
    case "INVALID_CURSOR":
    case "OUTSIDE_SERVICE_WINDOW":
    case "UPSTREAM_REJECTED":
      return 400;
    case "UNAUTHORIZED":
      return 401;
    case "PAYMENT_REQUIRED":
      return 402;
    case "CONTACT_OPTED_OUT":
    case "PROVIDER_NOT_CONNECTED":
    case "TEMPLATE_NOT_APPROVED":
    case "FORBIDDEN":
      return 403;
    case "CHANNEL_NOT_FOUND":
    case "TEMPLATE_NOT_FOUND":
    case "NOT_FOUND":
      return 404;
    case "CONFLICT":
    case "IDEMPOTENCY_KEY_IN_USE":
      return 409;
    case "PAYLOAD_TOO_LARGE":
      return 413;
    case "IDEMPOTENCY_KEY_REUSED":
      return 422;
    case "RATE_LIMITED":
      return 429;
    case "INTERNAL_ERROR":
      return 500;
    case "SERVICE_UNAVAILABLE":
      return 503;
  }
}

export const ErrorDetail = z.object({
  path: z.string().meta({ description: "dotted location of the offending value, e.g. `text` or `query.limit`" }),
  message: z.string(),
});

export const ErrorEnvelope = z
  .object({
    error: z.object({
      code: ErrorCode,
      message: z.string(),
      details: z.array(ErrorDetail).optional(),
    }),
  })
  .meta({ id: "Error" });
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;
