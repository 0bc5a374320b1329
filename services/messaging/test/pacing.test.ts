import { expect } from "chai";
import { eventually } from "@platform/testing";
import { ChannelPacer, reservePacingSlot, slowDownChannel } from "../src/service";
import { api, createChannel, eventsOf, newOrg, providerRequestsFor, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("per-channel pacing (GCRA in Postgres)", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  const db = () => (h.svc as unknown as { deps: { db: import("typeorm").DataSource } }).deps.db;

  it("spaces reservations one emission interval apart, and twice that while slowed down", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 10 });
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) waits.push(await reservePacingSlot(db(), channel.id));
    // Each slot is 100 ms after the previous one (minus the time the calls themselves took).
    for (let i = 1; i < waits.length; i++) expect(waits[i] - waits[i - 1]).to.be.within(60, 101);
    expect(waits[0]).to.be.below(5);

    const slow = await createChannel(h, org, { messagesPerSecond: 10 });
    await slowDownChannel(db(), slow.id);
    const a = await reservePacingSlot(db(), slow.id);
    const b = await reservePacingSlot(db(), slow.id);
    expect(b - a).to.be.within(160, 201);
  });

  it("coalesces concurrent reservations into few round trips; replicas never share a slot", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 1000 });
    const replicas = [new ChannelPacer(db()), new ChannelPacer(db())];
    const t0 = Date.now();
    // 150 concurrent sends on each of two replicas: each slot's absolute time is call time + wait.
    const slots = (
      await Promise.all(
        replicas.map((pacer) =>
          Promise.all(Array.from({ length: 150 }, async () => Date.now() + (await pacer.reserve(channel.id)))),
        ),
      )
    ).flat();
    const [row] = await db().query(`SELECT tat FROM messaging.channel_pacing WHERE channel_id = $1`, [channel.id]);
    // 300 slots at 1,000 per second: the channel's timeline moved 300 ms past the start, and no slot was wasted.
    expect(new Date(row.tat).getTime() - t0).to.be.within(295, 400);
    // The last slots are ~300 ms out: sends wait for their slot instead of going out at once.
    expect(Math.max(...slots) - t0).to.be.at.least(250);
    // Far fewer round trips than reservations.
    expect(replicas[0].roundTrips + replicas[1].roundTrips).to.be.below(20);
  });

  it("never sends faster than messagesPerSecond, across concurrent requests", async function () {
    this.timeout(20_000);
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 5 });
    const phones = Array.from({ length: 6 }, () => uniquePhone());
    for (const p of phones) await receiveInbound(h, channel, p);
    const answers = await Promise.all(phones.map((to) => api(h, org).post("/api/v1/messages").send({ to, text: "paced" })));
    for (const a of answers) expect(a.status).to.equal(200);
    // Requests waiting past their budget finish in the background; all end up sent.
    for (const a of answers) await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === a.body.id).length === 1, 15_000);
    const times = answers.map((a) => providerRequestsFor(h, a.body.id).find((r) => r.responseStatus === 200)!.receivedAt).sort((x, y) => x - y);
    // 6 sends at 5 per second: the last is at least 5 intervals (1 s) after the first.
    expect(times[times.length - 1] - times[0]).to.be.at.least(950);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).to.be.at.least(150);
  });
});
