import { expect } from "chai";
import { createLogger } from "@platform/logging";
import { ArrivalLinger } from "@platform/runtime";
import type { DeliveryRepository } from "../src/db/repositories/delivery.repository";
import type { Dispatcher } from "../src/use-cases/dispatcher";
import { EventIngestor } from "../src/use-cases/ingest-event";

/**
 * Events arriving a few milliseconds apart (a steady stream below saturation)
 * are stored in one statement: an idle ingestor waits about one gap before
 * writing (ADR 0016). A trickle is written at once. Each caller's promise
 * still settles only after its own event is stored.
 */
describe("unit: event ingestion groups the events of a stream, not of a trickle", () => {
  const setup = () => {
    const writes: string[][] = [];
    const repo = {
      async ingest(events: Array<{ id: string }>) {
        writes.push(events.map((e) => e.id));
        return [];
      },
    } as unknown as DeliveryRepository;
    const dispatcher = { leaseTerms: () => ({ busy: new Map(), capacity: 8, leaseMs: 60_000 }), adopt: () => undefined } as unknown as Dispatcher;
    // The linger reads a clock the test moves: gaps are what the test says, whatever the machine's speed.
    const clock = { now: 0 };
    const ingestor = new EventIngestor(repo, dispatcher, createLogger("ingest-test", "silent"), new ArrivalLinger(5, 1_000, () => clock.now));
    const settled: string[] = [];
    const ingest = (id: string) =>
      ingestor.ingest({ id: `evt_${id}`, event: "message.received", organizationId: "org", timestamp: new Date().toISOString(), data: { id } } as never).then(() => settled.push(id));
    return { writes, clock, settled, ingest };
  };
  const turn = () => new Promise((r) => setImmediate(r));

  it("in a stream, stores events of later turns together with the first, and settles each after its write", async () => {
    const { writes, clock, settled, ingest } = setup();
    // Events 250 ms apart on the linger's clock: an idle ingestor then waits two gaps, 500 ms of real time, for more
    // (room for the two turns below on a slow, busy machine).
    for (const id of ["s1", "s2", "s3"]) {
      await ingest(id);
      clock.now += 250;
    }
    writes.length = 0;
    const first = ingest("a");
    await turn();
    await turn();
    expect(writes).to.deep.equal([]);
    clock.now += 250;
    const second = ingest("b");
    await Promise.all([first, second]);
    expect(writes).to.deep.equal([["a", "b"]]);
    expect(settled.slice(3).sort()).to.deep.equal(["a", "b"]);
  });

  it("in a trickle (or for the first event), writes at once", async () => {
    const { writes, clock, ingest } = setup();
    // Written in the next turn, with no timer in between.
    const first = ingest("a");
    await turn();
    expect(writes).to.deep.equal([["a"]]);
    await first;
    clock.now += 60_000;
    const second = ingest("b");
    await turn();
    expect(writes).to.deep.equal([["a"], ["b"]]);
    await second;
  });
});
