import { z } from "zod";

/** Variables of the analytics service beyond the shared ones (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
export const envShape = {
  /** Most message events applied in one transaction (one batch). */
  ANALYTICS_BATCH_MAX: z.coerce.number().int().min(1).max(10_000).default(1_000),
  /** Events the consumer holds unacknowledged at most (JetStream max_ack_pending): the next batches wait in memory. */
  ANALYTICS_MAX_ACK_PENDING: z.coerce.number().int().min(10).max(100_000).default(5_000),
  /** JetStream ack wait: a batch not committed and acked by then is redelivered (a killed consumer's batch comes back). */
  ANALYTICS_ACK_WAIT_MS: z.coerce.number().int().min(500).max(600_000).default(30_000),
};
