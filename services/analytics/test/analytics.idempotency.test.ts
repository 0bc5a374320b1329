import { expect } from "chai";
import { eventually } from "@platform/testing";
import { analytics, counts, newMessageId, newOrg, publish, settle, statusEvent } from "./harness";

const DAY = "2026-04-02";
const C = "2026-04-02T08:15:00.250Z";

describe("analytics: redelivered, duplicated and out-of-order events count once", () => {
  it("the same events published again (new stream messages, as a redelivery or a replay) change nothing", async () => {
    const org = newOrg();
    const a = newMessageId();
    const b = newMessageId();
    const events = [statusEvent(org, a, C, "sent"), statusEvent(org, a, C, "delivered"), statusEvent(org, b, C, "sent")];
    await publish(events);
    await eventually(async () => (await analytics(org, DAY, DAY)).outboundMessages.total === 2, 20_000);
    // Duplicates JetStream cannot drop (no message id), twice, then settle.
    await publish(events, { msgId: false });
    await publish(events, { msgId: false });
    await settle();
    const body = await analytics(org, DAY, DAY);
    expect(body.outboundMessages.total).to.equal(2);
    expect(counts(body)).to.deep.equal({ sent: 1, delivered: 1, read: 0, failed: 0 });
  });

  it("read before delivered: read wins and the late delivered changes nothing", async () => {
    const org = newOrg();
    const id = newMessageId();
    await publish([statusEvent(org, id, C, "read"), statusEvent(org, id, C, "sent"), statusEvent(org, id, C, "delivered")]);
    await settle();
    expect(counts(await analytics(org, DAY, DAY))).to.deep.equal({ sent: 0, delivered: 0, read: 1, failed: 0 });
  });

  it("failed after delivered moves the message to failed once; read after failed changes nothing", async () => {
    const org = newOrg();
    const id = newMessageId();
    await publish([statusEvent(org, id, C, "sent"), statusEvent(org, id, C, "delivered")]);
    await eventually(async () => counts(await analytics(org, DAY, DAY)).delivered === 1, 20_000);
    await publish([statusEvent(org, id, C, "failed"), statusEvent(org, id, C, "failed"), statusEvent(org, id, C, "read")], { msgId: false });
    await settle();
    const body = await analytics(org, DAY, DAY);
    expect(body.outboundMessages.total).to.equal(1);
    expect(counts(body)).to.deep.equal({ sent: 0, delivered: 0, read: 0, failed: 1 });
  });

  it("read is final: a later failed changes nothing", async () => {
    const org = newOrg();
    const id = newMessageId();
    await publish([statusEvent(org, id, C, "sent"), statusEvent(org, id, C, "read")]);
    await eventually(async () => counts(await analytics(org, DAY, DAY)).read === 1, 20_000);
    await publish([statusEvent(org, id, C, "failed"), statusEvent(org, id, C, "delivered")]);
    await settle();
    expect(counts(await analytics(org, DAY, DAY))).to.deep.equal({ sent: 0, delivered: 0, read: 1, failed: 0 });
  });

  it("many messages with shuffled, repeated events end at each message's highest status, across batches", async () => {
    const org = newOrg();
    const order = ["sent", "delivered", "read"] as const;
    const events = [];
    const expected = { sent: 0, delivered: 0, read: 0, failed: 0 };
    for (let k = 0; k < 120; k++) {
      const id = newMessageId();
      const top = k % 3;
      expected[order[top]!]++;
      for (let s = 0; s <= top; s++) events.push(statusEvent(org, id, C, order[s]!), statusEvent(org, id, C, order[s]!));
    }
    // A deterministic shuffle (the events of one message arrive in any order, spread over several batches of 50).
    let seed = 7;
    for (let i = events.length - 1; i > 0; i--) {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      const j = seed % (i + 1);
      [events[i], events[j]] = [events[j]!, events[i]!];
    }
    await publish(events, { msgId: false });
    await settle();
    const body = await analytics(org, DAY, DAY);
    expect(body.outboundMessages.total).to.equal(120);
    expect(counts(body)).to.deep.equal(expected);
  });
});
