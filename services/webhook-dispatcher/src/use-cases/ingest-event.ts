import type { z } from "zod";
import type { DomainEvent } from "@platform/contracts";
import { currentRequestContext, type Logger } from "@platform/logging";
import { ArrivalLinger } from "@platform/runtime";
import type { Context } from "@platform/telemetry";
import type { DeliveryRepository } from "../db/repositories/delivery.repository";
import type { Dispatcher } from "./dispatcher";
import { serializeEvent } from "./payload";

type Incoming = z.infer<typeof DomainEvent>;
interface Pending {
  event: { id: string; organizationId: string; event: string; body: string; occurredAt: string };
  /** The consumer span's context (the event's trace): the first attempts continue it. */
  trace: Context | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * A domain event arrived: store its body once and one delivery job per
 * subscribed active webhook of its organization, then wake the workers.
 * Events handled at the same time are written together (group commit: one
 * statement and one commit for all that arrived during the previous write);
 * each caller's promise settles when its event is committed, so the bus
 * acks only what is durable.
 */
export class EventIngestor {
  private queue: Pending[] = [];
  private writing = false;

  constructor(
    private readonly repo: DeliveryRepository,
    private readonly dispatcher: Dispatcher,
    private readonly log: Logger,
    /**
     * How long an idle ingestor collects events (ADR 0016): about two gaps between recent events, 5 to 20 ms, in a
     * stream; none for a trickle.
     */
    private readonly linger = new ArrivalLinger(),
  ) {}

  ingest(event: Incoming): Promise<void> {
    // `webhook.test` is sent only by the test action, never through subscriptions.
    if (event.event === "webhook.test") return Promise.resolve();
    const data = event.data as { id: string } & Record<string, unknown>;
    const body = serializeEvent({ event: event.event, timestamp: event.timestamp, organizationId: event.organizationId, data });
    this.linger.arrived();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ event: { id: data.id, organizationId: event.organizationId, event: event.event, body, occurredAt: event.timestamp }, trace: currentRequestContext()?.trace, resolve, reject });
      if (!this.writing) {
        // An idle ingestor waits a moment for more events: one statement and one commit for those of the next few
        // milliseconds too (ADR 0010). While a write is in flight, the events arriving meanwhile go in the next one.
        this.writing = true;
        const lingerMs = this.linger.delayMs();
        if (lingerMs > 0) setTimeout(() => void this.drain(), lingerMs);
        else setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, 500);
        // A redelivery racing its first delivery inside one batch: one row is enough.
        const unique = [...new Map(batch.map((p) => [p.event.id, p.event])).values()];
        try {
          const jobs = await this.repo.ingest(unique, this.dispatcher.leaseTerms());
          const byId = new Map(unique.map((e) => [e.id, e]));
          const traceOf = new Map(batch.map((p) => [p.event.id, p.trace]));
          this.dispatcher.adopt(
            jobs.filter((j) => j.leased).map((j) => ({ ...j, event: byId.get(j.eventId)!.event, body: byId.get(j.eventId)!.body, trace: traceOf.get(j.eventId) })),
            jobs.some((j) => !j.leased),
          );
          for (const p of batch) p.resolve();
        } catch (err) {
          this.log.warn({ err: (err as Error).message, events: batch.length }, "storing events failed; they will be redelivered");
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
