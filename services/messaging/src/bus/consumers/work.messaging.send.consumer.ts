import { MESSAGING_SUBJECTS, STREAMS } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { leaseMs, processSendWork } from "../../use-cases/deliver";

/**
 * `work.messaging.send.v1`: durable (re)sends. Retries run for up to 24 hours
 * with a backoff capped at 60 s (about 1,500 deliveries at most), so
 * `maxDeliver` is set well above that; giving up is decided by the use case.
 * The ack wait is short (one lease and a margin): an item a crashed replica
 * had fetched comes back soon, not after minutes; slow handlers keep their
 * items with `working()`.
 */
export async function consumeSendWork(ctx: MessagingContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.work,
    durable: "messaging-send",
    subject: MESSAGING_SUBJECTS.sendWork,
    concurrency: 64,
    ackWaitMs: leaseMs(ctx.env.PROVIDER_TIMEOUT_MS) + 3_000,
    maxDeliver: 100_000,
    handler: (payload) => processSendWork(ctx, payload.messageId),
  });
}
