import { expect } from "chai";
import { createLogger } from "@platform/logging";
import type { DeliveryRepository } from "../src/db/repositories/delivery.repository";
import type { Dispatcher } from "../src/use-cases/dispatcher";
import { EventIngestor } from "../src/use-cases/ingest-event";

/**
 * Events arriving a few milliseconds apart (a steady stream below saturation)
 * are stored in one statement: an idle ingestor waits a moment before writing.
 * Each caller's promise still settles only after its own event is stored.
 */
describe("unit: event ingestion groups the events of a few milliseconds", () => {
  it("stores events of later turns together with the first, and settles each after its write", async () => {
    const writes: string[][] = [];
    const repo = {
      async ingest(events: Array<{ id: string }>) {
        writes.push(events.map((e) => e.id));
        return [];
      },
    } as unknown as DeliveryRepository;
    const dispatcher = { leaseTerms: () => ({ busy: new Map(), capacity: 8, leaseMs: 60_000 }), adopt: () => undefined } as unknown as Dispatcher;
    const ingestor = new EventIngestor(repo, dispatcher, createLogger("ingest-test", "silent"));
    const event = (id: string) =>
      ({ id: `evt_${id}`, event: "message.received", organizationId: "org", timestamp: new Date().toISOString(), data: { id } }) as never;
    const settled: string[] = [];
    const first = ingestor.ingest(event("a")).then(() => settled.push("a"));
    // A later turn of the event loop (the linger's timer cannot fire before this iteration's check phase).
    await new Promise((r) => setImmediate(r));
    expect(writes).to.deep.equal([]);
    const second = ingestor.ingest(event("b")).then(() => settled.push("b"));
    await Promise.all([first, second]);
    expect(writes).to.deep.equal([["a", "b"]]);
    expect(settled.sort()).to.deep.equal(["a", "b"]);
  });
});
