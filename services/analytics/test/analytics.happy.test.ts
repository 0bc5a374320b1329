import { expect } from "chai";
import { eventually } from "@platform/testing";
import { analytics, counts, newMessageId, newOrg, publish, settle, statusEvent } from "./harness";

describe("analytics: counts and rates (happy paths)", () => {
  it("counts a known mix of statuses exactly, with rates = count / total", async () => {
    const org = newOrg();
    const day = "2026-03-10";
    const at = (i: number) => new Date(Date.parse(`${day}T00:00:00.000Z`) + i * 997_123).toISOString();
    const events = [];
    // 10 sent, 20 delivered, 30 read, 7 failed (3 of them after delivered, 4 refused without a sent).
    let i = 0;
    for (let k = 0; k < 10; k++) events.push(statusEvent(org, newMessageId(), at(i++), "sent"));
    for (let k = 0; k < 20; k++) {
      const id = newMessageId();
      const c = at(i++);
      events.push(statusEvent(org, id, c, "sent"), statusEvent(org, id, c, "delivered"));
    }
    for (let k = 0; k < 30; k++) {
      const id = newMessageId();
      const c = at(i++);
      events.push(statusEvent(org, id, c, "sent"), statusEvent(org, id, c, "delivered"), statusEvent(org, id, c, "read"));
    }
    for (let k = 0; k < 3; k++) {
      const id = newMessageId();
      const c = at(i++);
      events.push(statusEvent(org, id, c, "sent"), statusEvent(org, id, c, "delivered"), statusEvent(org, id, c, "failed"));
    }
    for (let k = 0; k < 4; k++) events.push(statusEvent(org, newMessageId(), at(i++), "failed"));
    await publish(events);

    await eventually(async () => (await analytics(org, day, day)).outboundMessages.total === 67, 20_000);
    await settle();
    const final = await analytics(org, day, day);
    expect(final).to.deep.equal({
      period: { start: "2026-03-10T00:00:00.000Z", end: "2026-03-10T23:59:59.999Z" },
      outboundMessages: {
        total: 67,
        counts: { sent: 10, delivered: 20, read: 30, failed: 7 },
        deliveryRate: 20 / 67,
        readRate: 30 / 67,
        failureRate: 7 / 67,
      },
    });
  });

  it("answers zero-filled counts and rates 0 for an organization without messages", async () => {
    const body = await analytics(newOrg(), "2026-01-01", "2026-12-31");
    expect(body).to.deep.equal({
      period: { start: "2026-01-01T00:00:00.000Z", end: "2026-12-31T23:59:59.999Z" },
      outboundMessages: { total: 0, counts: { sent: 0, delivered: 0, read: 0, failed: 0 }, deliveryRate: 0, readRate: 0, failureRate: 0 },
    });
  });

  it("accepts full ISO 8601 with offsets and answers the period in UTC", async () => {
    const body = await analytics(newOrg(), "2026-01-01T02:00:00+02:00", "2026-01-01T10:30:00.5Z");
    expect(body.period).to.deep.equal({ start: "2026-01-01T00:00:00.000Z", end: "2026-01-01T10:30:00.500Z" });
  });

  it("a range across months and a year reads the same messages the day ranges do", async () => {
    const org = newOrg();
    // One message on each of 40 days spread over 2025, statuses rotating.
    const statuses = ["sent", "delivered", "read", "failed"] as const;
    const expected = { sent: 0, delivered: 0, read: 0, failed: 0 };
    const events = [];
    for (let k = 0; k < 40; k++) {
      const c = new Date(Date.UTC(2025, 0, 1) + k * 9 * 86_400_000 + k * 3_600_000 + k * 61_001).toISOString();
      const s = statuses[k % 4]!;
      expected[s]++;
      events.push(statusEvent(org, newMessageId(), c, s));
    }
    await publish(events);
    await eventually(async () => (await analytics(org, "2025-01-01", "2025-12-31")).outboundMessages.total === 40, 20_000);
    await settle();
    expect(counts(await analytics(org, "2025-01-01", "2025-12-31"))).to.deep.equal(expected);
    expect((await analytics(org, "2024-12-31T23:59:59.999Z", "2026-01-01T00:00:00.000Z")).outboundMessages.total).to.equal(40);
  });
});
