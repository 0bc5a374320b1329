import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { TemplateJobsContext } from "../../context";
import { processTemplateStatusBatch } from "../../use-cases/template-status";

/** `provider.inbound.v1`: raw provider batches; this service reads only `message_template_status_update` changes. */
export async function consumeProviderInbound(ctx: TemplateJobsContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.provider,
    durable: "template-jobs-provider-inbound",
    subject: SUBJECTS.providerInbound,
    concurrency: 4,
    ackWaitMs: 30_000,
    maxDeliver: 1_000,
    handler: (payload) => processTemplateStatusBatch(ctx, payload.body),
  });
}
