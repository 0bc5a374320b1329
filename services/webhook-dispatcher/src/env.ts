import { z } from "zod";
import { envBoolean, envIntList } from "@platform/config";

/** Environment of the webhook dispatcher beyond the shared variables (contract section 1). */
export const envShape = {
  /** `true` lets webhook URLs use `http:` and loopback/private/link-local addresses (development and tests only). */
  WEBHOOK_ALLOW_PRIVATE_TARGETS: envBoolean(false),
  /** Delays before retry 1, 2 and 3 of a failed delivery, in ms (one value per retry), each at most a day. */
  WEBHOOK_RETRY_DELAYS_MS: envIntList("5000,300000,1800000", 86_400_000).refine((l) => l.length >= 1 && l.length <= 10, "must list 1 to 10 delays"),
  /** Response timeout of one delivery attempt (connect, headers and body), in ms. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /**
   * Attempts in flight at once to one webhook, per dispatcher process (its lane also holds three times as many leased
   * jobs). 8 capped one endpoint near 8 / its response time: at a few ms per answer, below the 2,000 deliveries per
   * second of a channel's status callbacks, and the overflow went through the claim loop (bench/RESULTS.md).
   */
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: z.coerce.number().int().min(1).max(256).default(32),
};

export type WebhookEnv = z.infer<z.ZodObject<typeof envShape>>;
