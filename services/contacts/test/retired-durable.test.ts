import { expect } from "chai";
import { AckPolicy } from "nats";
import { STREAMS } from "@platform/contracts";
import { retireKeywordConsumer } from "../src/bus/consumers/retired";
import type { ContactsContext } from "../src/use-cases/context";
import { harness } from "./harness";

describe("the keyword consumer of before ADR 0014", () => {
  it("is deleted from the events stream at start, and a start without it is fine", async () => {
    const bus = harness().bus;
    const stream = bus.streamName(STREAMS.events);
    await bus.jsm.consumers.add(stream, { durable_name: "contacts-keyword-opt-outs", ack_policy: AckPolicy.Explicit });
    const ctx = { bus } as unknown as ContactsContext;
    await retireKeywordConsumer(ctx);
    const left = await bus.jsm.consumers.info(stream, "contacts-keyword-opt-outs").then(() => true, () => false);
    expect(left).to.equal(false);
    await retireKeywordConsumer(ctx);
  });
});
