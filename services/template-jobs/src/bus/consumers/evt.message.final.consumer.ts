import { DomainEvent, eventSubject, STREAMS } from "@platform/contracts";
import type { TemplateJobsContext } from "../../context";
import { finalizeSend } from "../../use-cases/finalize-send";

/**
 * `evt.message.sent.v1` and `evt.message.failed.v1` (one durable each: one
 * filter subject per consumer on nats-server 2.9): the final outcome of
 * template sends messaging answered `pending`.
 */
export async function consumeMessageFinalEvents(ctx: TemplateJobsContext): Promise<void> {
  for (const type of ["message.sent", "message.failed"] as const) {
    await ctx.bus.consume({
      stream: STREAMS.events,
      durable: `template-jobs-${type.replace(".", "-")}`,
      subject: { subject: eventSubject(type), schema: DomainEvent },
      // Most events wait in memory for their batch's answer (a few hundred ms, `BatchesInFlight`): room for a second of them.
      concurrency: 1_024,
      ackWaitMs: 30_000,
      maxDeliver: 200,
      handler: (event) => finalizeSend(ctx, event),
    });
  }
}
