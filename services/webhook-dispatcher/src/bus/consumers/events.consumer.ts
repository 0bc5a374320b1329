import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import type { EventIngestor } from "../../use-cases/ingest-event";

/** Durable name of the one consumer of every domain event (`evt.>`). */
export const EVENTS_DURABLE = "webhook-dispatcher-events";

/**
 * Every domain event: jobs are committed before the ack, so an event is
 * never lost between JetStream and the delivery table; a redelivery after a
 * crash between commit and ack creates nothing twice.
 */
export async function consumeEvents(bus: Bus, ingestor: EventIngestor): Promise<void> {
  await bus.consume({
    stream: STREAMS.events,
    durable: EVENTS_DURABLE,
    subject: SUBJECTS.events,
    // Many at once, so the ingestor writes them in batches.
    concurrency: 256,
    yieldUnderLoad: true,
    ackWaitMs: 30_000,
    handler: async (event) => {
      await ingestor.ingest(event);
    },
  });
}
