import { expect } from "chai";
import type { DataSource } from "typeorm";
import { eventually } from "@platform/testing";
import {
  ADAPTIVE_PACING,
  channelPacingRate,
  reserveBulkPacingSlots,
  reservePacingSlots,
  slowDownChannel,
  THROTTLED_RETRY_MAX_MS,
  transientRetryDelayMs,
} from "../src/service";
import { api, createChannel, eventsOf, newOrg, providerRequestsFor, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

/** Adaptive pacing after 130429 (ADR 0003): decisions of the pacing row and the retry policy, not wall-clock gaps. */
describe("adaptive pacing after 130429", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });
  afterEach(() => h.sim.setMode({ kind: "ok" }));

  const db = () => (h.svc as unknown as { deps: { db: DataSource } }).deps.db;
  /** As if the last decrease happened `ms` earlier: the cooldown has run out and the rate has climbed since. */
  const backdate = (channelId: string, ms: number) =>
    db().query(`UPDATE messaging.channel_pacing SET decreased_at = decreased_at - $2 * interval '1 millisecond' WHERE channel_id = $1`, [channelId, ms]);
  const rowOf = async (channelId: string): Promise<{ rate: number | null; decreased_at: Date | null; tat: Date }> =>
    (await db().query(`SELECT rate, decreased_at, tat FROM messaging.channel_pacing WHERE channel_id = $1`, [channelId]))[0];
  const at = (d: Date, plusMs: number) => new Date(d.getTime() + plusMs);

  it("halves the rate on 130429, once per cooldown, then climbs back additively to messagesPerSecond", async () => {
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 100 });
    expect(await channelPacingRate(db(), channel.id)).to.include({ rate: 100, messagesPerSecond: 100, decreasedAt: null });

    expect(await slowDownChannel(db(), channel.id)).to.deep.equal({ decreased: true, rate: 50 });
    // The sends in flight at the old rate answer 130429 too: one signal, one decrease.
    expect(await slowDownChannel(db(), channel.id)).to.deep.equal({ decreased: false, rate: 50 });

    const { decreased_at: t0 } = await rowOf(channel.id);
    const step = 100 * ADAPTIVE_PACING.increaseSharePerSecond;
    expect((await channelPacingRate(db(), channel.id, t0!))!.rate).to.be.closeTo(50, 1e-6);
    expect((await channelPacingRate(db(), channel.id, at(t0!, 2_000)))!.rate).to.be.closeTo(50 + 2 * step, 0.05);
    expect((await channelPacingRate(db(), channel.id, at(t0!, 5_000)))!.rate).to.be.closeTo(100, 0.05);
    expect((await channelPacingRate(db(), channel.id, at(t0!, 60_000)))!.rate).to.equal(100);
  });

  it("10 s of 130429 (one decrease per second) keep the rate low but above the floor; 10 s later it is full again", async () => {
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 80 });
    for (let s = 0; s < 10; s++) {
      const r = await slowDownChannel(db(), channel.id);
      expect(r!.decreased).to.equal(true);
      await backdate(channel.id, ADAPTIVE_PACING.decreaseCooldownMs + 1);
    }
    await slowDownChannel(db(), channel.id);
    const { rate, decreased_at: last } = await rowOf(channel.id);
    expect(rate).to.be.at.least(80 * ADAPTIVE_PACING.floorShare).and.at.most(80 / 4);
    // Recovery: additive, whole within (1 - floor) / increaseShare seconds.
    const full = ((1 - ADAPTIVE_PACING.floorShare) / ADAPTIVE_PACING.increaseSharePerSecond) * 1_000;
    expect((await channelPacingRate(db(), channel.id, at(last!, 1_000)))!.rate).to.be.closeTo(rate! + 8, 0.05);
    expect((await channelPacingRate(db(), channel.id, at(last!, full)))!.rate).to.equal(80);
    // Never above messagesPerSecond.
    expect((await channelPacingRate(db(), channel.id, at(last!, 10 * full)))!.rate).to.equal(80);
  });

  it("never goes below the floor share of messagesPerSecond", async () => {
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 160 });
    await slowDownChannel(db(), channel.id);
    // A rate near zero right before the next 130429 (as after many decreases in a row).
    await db().query(`UPDATE messaging.channel_pacing SET rate = 0.5, decreased_at = clock_timestamp() - interval '1001 milliseconds' WHERE channel_id = $1`, [channel.id]);
    const r = await slowDownChannel(db(), channel.id);
    expect(r!.decreased).to.equal(true);
    expect(r!.rate).to.equal(160 * ADAPTIVE_PACING.floorShare);
  });

  it("reservations use the decreased rate: slots one decreased interval apart, after a short pause", async () => {
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 10 });
    await slowDownChannel(db(), channel.id);
    const r = await reserveBulkPacingSlots(db(), channel.id, 3, 10_000);
    expect(r!.granted).to.equal(3);
    // 5 per second right after the decrease (a little more by the time of the reservation): about 200 ms apart.
    expect(r!.intervalMs).to.be.within(150, 200 + 1e-6);
    expect(r!.firstInMs).to.be.at.most(ADAPTIVE_PACING.pauseMs + 1e-6);
  });

  it("a retry on a backed-up channel books no slot it cannot use, and comes back when there is room", async () => {
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 10 });
    await reservePacingSlots(db(), channel.id, 50); // 5 s of the channel's timeline taken
    const before = (await rowOf(channel.id)).tat.getTime();
    const r = await reserveBulkPacingSlots(db(), channel.id, 1, 2_000);
    expect(r!.granted).to.equal(0);
    expect((await rowOf(channel.id)).tat.getTime()).to.equal(before);
    // Asks again when the 2 s horizon has room for half its width: about 5 s - 1 s from now.
    expect(r!.retryInMs).to.be.within(2_000, 4_001);
  });

  it("caps the backoff of 130429'd sends at a few seconds; other transient failures keep the long backoff", () => {
    const throttled = Array.from({ length: 20 }, (_, i) => transientRetryDelayMs(i + 1, "130429"));
    expect(throttled.slice(0, 3)).to.deep.equal([1_000, 2_000, 2_000]);
    expect(Math.max(...throttled)).to.equal(THROTTLED_RETRY_MAX_MS);
    expect(THROTTLED_RETRY_MAX_MS).to.be.at.most(4_000);
    expect(transientRetryDelayMs(10, "timeout")).to.equal(60_000);
    expect(transientRetryDelayMs(3, "131000")).to.equal(4_000);
  });

  it("a message refused with 130429 several times is sent once the provider takes it again; the channel was slowed and recovers", async function () {
    this.timeout(40_000);
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 20 });
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "error", httpStatus: 400, code: 130429, message: "Rate limit hit", times: 4, phoneNumberId: channel.providerPhoneNumberId });
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "throttled" });
    expect(res.status).to.equal(200);
    expect(res.body.providerMessageId).to.equal(null);
    await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === res.body.id).length === 1, 30_000);
    // The simulator's mode is global: another test's background send may have taken one of the four refusals.
    const statuses = providerRequestsFor(h, res.body.id).map((r) => r.responseStatus);
    expect(statuses.length).to.be.within(2, 5);
    expect(statuses).to.deep.equal([...statuses.slice(0, -1).map(() => 400), 200]);
    const [{ attempts }] = await db().query(`SELECT attempts FROM messaging.messages WHERE id = $1`, [res.body.id]);
    expect(attempts).to.equal(statuses.length);
    const { decreased_at: last } = await rowOf(channel.id);
    expect(last).to.not.equal(null);
    expect((await channelPacingRate(db(), channel.id, at(last!, 10_000)))!.rate).to.equal(20);
  });
});
