import { z } from "zod";
import { envUrl } from "@platform/config";

/** Environment of the messaging service beyond the shared variables (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
export const envShape = {
  /** Base URL of the provider's Graph API, or of the simulator (`npm start` passes the simulator's URL). */
  PROVIDER_BASE_URL: envUrl(["http:", "https:"]),
  /** Bearer token sent to the provider on every call. */
  PROVIDER_ACCESS_TOKEN: z.string().min(1).default("dev-provider-token"),
  /** Bounds one provider call (connect, answer and body); past it the send is retried in the background. */
  PROVIDER_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /**
   * A provider call that got no answer in time may still have been accepted: its retry waits at least this long,
   * so the provider's status callback (it carries our message id) can settle the message first and the customer
   * is not sent it twice. Answered failures (5xx, 130429) keep the normal backoff. Until 1 s before it, the call's
   * own answer is still read: a late acceptance settles the message at once (ADR 0027, addendum).
   */
  PROVIDER_UNANSWERED_RETRY_MS: z.coerce.number().int().min(0).max(3_600_000).default(15_000),
  /** A conversation without any message for this long is closed by the sweeper. */
  CONVERSATION_IDLE_TIMEOUT_MS: z.coerce.number().int().min(100).default(86_400_000),
};
