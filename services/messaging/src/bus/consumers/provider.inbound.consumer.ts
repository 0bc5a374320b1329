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
    // The start of the inbound pipeline (contacts, outbox, dispatcher, analytics): while the stack serves requests
    // and is short of CPU, its backlog waits in JetStream (ADR 0010).
    yieldUnderLoad: "pause",
    ackWaitMs: 30_000,
    maxDeliver: 1_000,
    handler: (payload) => processProviderBatch(ctx, payload.body),
  });
}
