import { z } from "zod";

/** Environment of the template-jobs service beyond the shared variables (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
export const envShape = {
  /** How often an idle runner looks for a job to run (due scheduled jobs, released leases). */
  JOB_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(500),
  /** A replica owns a job for this long after its last renewal; past it another replica takes the job over. */
  JOB_LEASE_MS: z.coerce.number().int().min(1_000).max(600_000).default(30_000),
  /** Jobs one replica runs at once (a throttled job waiting for a slot more than 2 s away is not running: it is released). */
  JOB_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  /**
   * Time slice: a job that has run this long gives its place back when the replica is full and another organization
   * (with fewer jobs running here) has a due job waiting, so one organization's huge jobs never starve the others.
   */
  JOB_SLICE_MS: z.coerce.number().int().min(100).max(3_600_000).default(10_000),
  /** Bound of one `rpc.messaging.template.send.v1` batch call; past it the batch is sent again with the same keys. */
  SEND_BATCH_TIMEOUT_MS: z.coerce.number().int().min(500).max(600_000).default(60_000),
  /** Largest batch of sends asked of messaging at once (smaller on slow channels: about one second of the channel's rate). */
  SEND_BATCH_MAX: z.coerce.number().int().min(1).max(1_000).default(500),
  /**
   * Send batches of one job in flight at once: while some are paced and sent by messaging, the next is claimed, checked
   * and stored, so the channel's bulk slots never wait for a batch (with 2, a loaded machine left the channel idle
   * between batches).
   */
  SEND_PIPELINE: z.coerce.number().int().min(1).max(8).default(3),
  /** Bound of the contacts opt-out check and the messaging channel lookup. */
  RPC_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
};
