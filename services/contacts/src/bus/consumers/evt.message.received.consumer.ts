import { PermanentError } from "@platform/bus";
import { DomainEvent, MessageReceivedData, STREAMS, eventSubject } from "@platform/contracts";
import type { ContactsContext } from "../../use-cases/context";
import { handleInboundMessage } from "../../use-cases/keyword-opt-out";

/** evt.message.received.v1 (messaging) → keyword opt-outs. */
export async function consumeMessageReceived(ctx: ContactsContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.events,
    durable: "contacts-keyword-opt-outs",
    subject: { subject: eventSubject("message.received"), schema: DomainEvent },
    concurrency: ctx.env.KEYWORD_CONSUMER_CONCURRENCY,
    yieldUnderLoad: true,
    handler: async (event) => {
      if (event.event !== "message.received") return;
      const data = MessageReceivedData.safeParse(event.data);
      if (!data.success) throw new PermanentError(`message.received data: ${data.error.message}`);
      await handleInboundMessage(ctx, event.organizationId, data.data);
    },
  });
}
