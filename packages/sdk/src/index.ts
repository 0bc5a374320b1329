/**
 * @platform/sdk: the typed client of the Business Messaging API (`/api/v1`).
 * Types come from @platform/contracts (type-only imports: nothing of it is loaded at run time).
 */
export * from "./client";
export { ApiError, ConnectionError, type ApiErrorDetail } from "./errors";
export { PageIterator, type Page } from "./pagination";
export {
  Transport,
  backoffDelay,
  parseRetryAfter,
  type Answer,
  type RequestOptions,
  type ResponseInfo,
  type RetryInfo,
  type RetryOptions,
  type SendOptions,
  type TransportOptions,
} from "./transport";
export type { ErrorCode } from "@platform/contracts";
/** Verification of the platform's signed webhooks (X-Service-Signature and Standard Webhooks). */
export * as webhooks from "@platform/webhook-verify";
export { verifySignature, verifyStandardWebhook, type RawBody, type StandardWebhookHeaders, type StandardVerifyOptions } from "@platform/webhook-verify";
