import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { processProviderBatch } from "../../use-cases/process-provider-batch";

/** `provider.inbound.v1`: raw provider webhook batches the gateway verified and stored. */
export async function consumeProviderInbound(ctx: MessagingContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.provider,
    durable: "messaging-provider-inbound",
    subject: SUBJECTS.providerInbound,
    concurrency: 8,
    yieldUnderLoad: true,
    ackWaitMs: 30_000,
    maxDeliver: 1_000,
    handler: (payload) => processProviderBatch(ctx, payload.body),
  });
}
