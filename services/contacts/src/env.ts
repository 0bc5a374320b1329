import { z } from "zod";

/** Variables of the contacts service beyond the shared ones (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
export const envShape = {
  /** How long to wait for the messaging service to answer a channel lookup before answering 503. */
  CHANNEL_LOOKUP_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  /**
   * Inbound messages checked for opt-out keywords at once by this process. Kept well under the database pool (10):
   * under an inbound flood the consumer must leave connections to the API and the opt-out checks of the send path
   * (a request waiting 5 s for a connection is a 503), and a backlog waits in JetStream, not in the pool's queue.
   */
  KEYWORD_CONSUMER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(4),
  /**
   * How long the keyword consumer keeps an organization's keyword list in memory. This process's own organization
   * sync evicts it at once; a change applied by another replica counts within this time. 0 reads it per message.
   */
  KEYWORD_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
};
