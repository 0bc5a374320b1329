import { z } from "zod";

/** Variables of the contacts service beyond the shared ones (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
export const envShape = {
  /** How long to wait for the messaging service to answer a channel lookup before answering 503. */
  CHANNEL_LOOKUP_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  /**
   * How long keyword matching (inbound batches' contacts requests, ADR 0014) keeps an organization's keyword list in memory. This process's own organization
   * sync evicts it at once; a change applied by another replica counts within this time. 0 reads it per message.
   */
  KEYWORD_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
};
