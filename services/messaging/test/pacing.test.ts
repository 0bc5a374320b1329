import { expect } from "chai";
import { eventually } from "@platform/testing";
import { ChannelPacer, reservePacingSlot, reservePacingSlots } from "../src/service";
import { api, createChannel, eventsOf, newOrg, providerRequestsFor, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("per-channel pacing (GCRA in Postgres)", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  const db = () => (h.svc as unknown as { deps: { db: import("typeorm").DataSource } }).deps.db;

  // Every assertion here is on what the pacer decided (slots on the database clock, the row's `tat`), never on
  // wall-clock gaps: a slow or busy machine changes when the calls happen, not whether the slots are right.
  const EPS = 0.01; // ms: float rounding of epoch milliseconds

  /** The channel's timeline end (the GCRA row's `tat`), epoch ms on the database clock. */
  const tatOf = async (channelId: string): Promise<number> => {
    const [row] = await db().query(`SELECT (extract(epoch FROM tat) * 1000)::float8 AS tat FROM messaging.channel_pacing WHERE channel_id = $1`, [channelId]);
    return row.tat;
  };

  it("spaces reservations one emission interval apart", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 10 });
    const slots: Array<NonNullable<Awaited<ReturnType<typeof reservePacingSlots>>>> = [];
    for (let i = 0; i < 5; i++) slots.push((await reservePacingSlots(db(), channel.id))!);
    // A fresh channel's first slot is now: no wait.
    expect(slots[0].firstInMs).to.be.closeTo(0, EPS);
    expect(slots[0].firstAt).to.be.closeTo(slots[0].decidedAt, EPS);
    expect(await reservePacingSlot(db(), (await createChannel(h, org, { messagesPerSecond: 10 })).id)).to.equal(0);
    for (let i = 0; i < slots.length; i++) {
      expect(slots[i].intervalMs).to.equal(100);
      // Each slot starts where the previous one ends, or now when the timeline has fallen behind (GCRA: max(tat, now)).
      if (i > 0) expect(slots[i].firstAt).to.be.closeTo(Math.max(slots[i - 1].firstAt + 100, slots[i].decidedAt), EPS);
      // The offset handed back is the slot's distance from the decision.
      expect(slots[i].firstInMs).to.be.closeTo(slots[i].firstAt - slots[i].decidedAt, EPS);
    }
    expect(await tatOf(channel.id)).to.be.closeTo(slots[4].firstAt + 100, EPS);
    // n slots in one reservation: n consecutive intervals.
    const five = (await reservePacingSlots(db(), channel.id, 5))!;
    expect(five.firstAt).to.be.closeTo(Math.max(slots[4].firstAt + 100, five.decidedAt), EPS);
    expect(await tatOf(channel.id)).to.be.closeTo(five.firstAt + 500, EPS);

    // The rate after a 130429 (decreased, then climbing back) is pinned by pacing-adaptive.test.ts.
  });

  it("coalesces concurrent reservations into few round trips; replicas never share a slot", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 1000 });
    const replicas = [new ChannelPacer(db()), new ChannelPacer(db())];
    // 150 concurrent sends on each of two replicas, all submitted in one event-loop turn.
    const slots = (await Promise.all(replicas.map((pacer) => Promise.all(Array.from({ length: 150 }, () => pacer.reserveSlot(channel.id)))))).flat();
    const starts = slots.map((s) => s.slotAt!).sort((x, y) => x - y);
    // 300 slots at 1,000 per second: 300 distinct slots at least 1 ms apart (no two sends share or overlap a slot)...
    for (let i = 1; i < starts.length; i++) expect(starts[i] - starts[i - 1]).to.be.at.least(1 - EPS);
    // ...the timeline spans at least 300 ms (sends wait for their slot instead of going out at once), and the row's
    // `tat` is the end of the last slot: no slot was wasted.
    expect(starts[starts.length - 1] - starts[0]).to.be.at.least(299 - EPS);
    expect(await tatOf(channel.id)).to.be.closeTo(starts[starts.length - 1] + 1, EPS);
    // Each replica's slots are consecutive (one batch), and its waits follow its slots' order.
    for (let r = 0; r < 2; r++) {
      const mine = slots.slice(r * 150, (r + 1) * 150);
      for (let i = 1; i < mine.length; i++) {
        expect(mine[i].slotAt! - mine[i - 1].slotAt!).to.be.closeTo(1, EPS);
        expect(mine[i].waitMs).to.be.at.least(mine[i - 1].waitMs);
      }
    }
    // One round trip per replica: everything submitted in one turn goes in one batch.
    expect(replicas.map((p) => p.roundTrips)).to.deep.equal([1, 1]);
  });

  it("never sends faster than messagesPerSecond, across concurrent requests", async function () {
    this.timeout(30_000);
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 5 });
    const phones = Array.from({ length: 6 }, () => uniquePhone());
    for (const p of phones) await receiveInbound(h, channel, p);
    // Markers on the channel's timeline right before and right after the sends (the same GCRA row).
    const before = (await reservePacingSlots(db(), channel.id))!;
    const answers = await Promise.all(phones.map((to) => api(h, org).post("/api/v1/messages").send({ to, text: "paced" })));
    for (const a of answers) expect(a.status).to.equal(200);
    const after = (await reservePacingSlots(db(), channel.id))!;
    // 6 sends at 5 per second took 6 intervals of 200 ms each on the timeline, between the markers: none shared a
    // slot or went out unpaced.
    expect(before.intervalMs).to.equal(200);
    expect(after.firstAt - (before.firstAt + 200)).to.be.at.least(6 * 200 - EPS);
    // Requests waiting past their budget finish in the background; all end up sent, each with one accepted call.
    for (const a of answers) await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === a.body.id).length === 1, 15_000);
    for (const a of answers) expect(providerRequestsFor(h, a.body.id).filter((r) => r.responseStatus === 200)).to.have.length(1);
  });
});
