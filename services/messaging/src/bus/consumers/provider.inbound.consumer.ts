import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { processProviderBatch } from "../../use-cases/process-provider-batch";
import { STATUS_CALLBACKS_DURABLE } from "../callback-watermark";

/**
 * Raw provider webhook batches the gateway verified and stored, on two subjects (`providerBatchSubject`):
 * - `provider.inbound.v1`: status callbacks (and anything that is not inbound messages only). A status callback
 *   settles a send whose provider answer was lost (its sender was killed, or the call timed out); a retry that ran
 *   before it could send the message twice, so these never wait for the load gate.
 * - `provider.messages.v1`: inbound messages only, the start of a pipeline through contacts, the outbox, the
 *   dispatcher and analytics. While the stack serves requests and is short of CPU, one batch at a time with a pause:
 *   the backlog waits in JetStream (ADR 0010).
 * Both are handled the same way; a batch of either kind on the other subject (older publishers) is handled all the same.
 */
export async function consumeProviderInbound(ctx: MessagingContext): Promise<void> {
  const common = { stream: STREAMS.provider, concurrency: 8, ackWaitMs: 30_000, maxDeliver: 1_000 } as const;
  await ctx.bus.consume({
    ...common,
    durable: STATUS_CALLBACKS_DURABLE,
    subject: SUBJECTS.providerInbound,
    handler: (payload) => processProviderBatch(ctx, payload.body, payload.receivedAt),
  });
  await ctx.bus.consume({
    ...common,
    durable: "messaging-provider-messages",
    subject: SUBJECTS.providerMessages,
    yieldUnderLoad: "pause",
    handler: (payload) => processProviderBatch(ctx, payload.body, payload.receivedAt),
  });
}
