import { z } from "zod";

/** Variables of the contacts service beyond the shared ones (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
export const envShape = {
  /** How long to wait for the messaging service to answer a channel lookup before answering 503. */
  CHANNEL_LOOKUP_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  /** Inbound messages checked for opt-out keywords at once by this process. */
  KEYWORD_CONSUMER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(16),
};
