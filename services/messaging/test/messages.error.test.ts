import { expect } from "chai";
import { eventually } from "@platform/testing";
import { newId } from "@platform/id";
import { contextOf, reservePacingSlots } from "../src/service";
import { channelsRepository } from "../src/db/repositories/channels.repository";
import { attemptSend } from "../src/use-cases/deliver";
import { sendMessage } from "../src/use-cases/send-message";
import type { ApiError } from "@platform/http";
import {
  api,
  createChannel,
  eventsOf,
  newOrg,
  providerRequestsFor,
  receiveInbound,
  sharedHarness,
  uniquePhone,
  type Harness,
} from "./helpers/harness";

describe("POST /api/v1/messages (errors)", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  /** Provider calls made so far on these channels (the shared harness's other tests call it on theirs meanwhile). */
  const requestsOn = (...channels: Array<{ providerPhoneNumberId: string }>) =>
    h.sim.requests.filter((r) => channels.some((c) => c.providerPhoneNumberId === r.phoneNumberId)).length;

  /** A new organization's channel, a contact whose service window on it is open, and the service's context. */
  async function windowOpen() {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    return { org, channel, phone, ctx: contextOf((h.svc as unknown as { deps: Parameters<typeof contextOf>[0] }).deps) };
  }

  it("validates to and text with VALIDATION_ERROR details", async () => {
    const org = newOrg();
    const cases: Array<[unknown, string]> = [
      [{ text: "hi" }, "to"],
      [{ to: "12", text: "hi" }, "to"],
      [{ to: "1".repeat(33), text: "hi" }, "to"],
      [{ to: "+1415abc0000", text: "hi" }, "to"],
      [{ to: "+14155550123" }, "text"],
      [{ to: "+14155550123", text: "" }, "text"],
      [{ to: "+14155550123", text: "x".repeat(4097) }, "text"],
      [{ to: "+14155550123", text: 5 }, "text"],
      [{ to: "+14155550123", text: "hi", messagingChannelId: 7 }, "messagingChannelId"],
    ];
    for (const [body, path] of cases) {
      const res = await api(h, org).post("/api/v1/messages").send(body as object);
      expect(res.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
    }
    const notJson = await api(h, org).post("/api/v1/messages").set("content-type", "application/json").send("{nope");
    expect(notJson.status).to.equal(400);
    expect(notJson.body.error.code).to.equal("INVALID_JSON");
    const array = await api(h, org).post("/api/v1/messages").send([1, 2]);
    expect(array.status).to.equal(400);
    expect(array.body.error.code).to.equal("VALIDATION_ERROR");
  });

  it("accepts text of exactly 4096 characters", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "y".repeat(4096) });
    expect(res.status).to.equal(200);
  });

  it("404 CHANNEL_NOT_FOUND without any channel, for an unknown id, and for another organization's channel", async () => {
    const org = newOrg();
    const none = await api(h, org).post("/api/v1/messages").send({ to: "+14155550123", text: "hi" });
    expect(none.status).to.equal(404);
    expect(none.body.error.code).to.equal("CHANNEL_NOT_FOUND");

    const own = await createChannel(h, org);
    for (const id of ["ch_nope", `ch_${"x".repeat(300)}`]) {
      const unknown = await api(h, org).post("/api/v1/messages").send({ to: "+14155550123", text: "hi", messagingChannelId: id });
      expect([unknown.status, unknown.body.error.code], id.slice(0, 10)).to.deep.equal([404, "CHANNEL_NOT_FOUND"]);
    }

    const other = newOrg();
    const foreign = await createChannel(h, other);
    const cross = await api(h, org).post("/api/v1/messages").send({ to: "+14155550123", text: "hi", messagingChannelId: foreign.id });
    expect(cross.status).to.equal(404);
    expect(cross.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    expect(requestsOn(own, foreign)).to.equal(0);
  });

  it("403 PROVIDER_NOT_CONNECTED when the channel's connection is off", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { connected: false });
    const res = await api(h, org).post("/api/v1/messages").send({ to: "+14155550123", text: "hi", messagingChannelId: channel.id });
    expect(res.status).to.equal(403);
    expect(res.body.error.code).to.equal("PROVIDER_NOT_CONNECTED");
  });

  it("403 CONTACT_OPTED_OUT with message 'Contact opted out', per channel", async () => {
    const org = newOrg();
    const a = await createChannel(h, org);
    const b = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, a, phone);
    await receiveInbound(h, b, phone);
    await h.contacts.optOut(org, a.id, phone);
    const before = requestsOn(a);
    const blocked = await api(h, org).post("/api/v1/messages").send({ to: phone.slice(1), text: "hi", messagingChannelId: a.id });
    expect(blocked.status).to.equal(403);
    expect(blocked.body.error).to.deep.equal({ code: "CONTACT_OPTED_OUT", message: "Contact opted out" });
    expect(requestsOn(a)).to.equal(before);
    const otherChannel = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "hi", messagingChannelId: b.id });
    expect(otherChannel.status).to.equal(200);
  });

  it("an opt-out set while a send waits for its retry stops it: message.failed (contact_opted_out), never sent", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "error", httpStatus: 503, code: 2, message: "Service temporarily unavailable", times: 1_000, phoneNumberId: channel.providerPhoneNumberId });
    let res;
    try {
      res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "queued, then opted out", messagingChannelId: channel.id });
      expect(res.status).to.equal(200);
      expect(res.body.providerMessageId).to.equal(null);
      await h.contacts.optOut(org, channel.id, phone);
    } finally {
      h.sim.setMode({ kind: "ok" });
    }
    const failed = await eventually(() => {
      const list = eventsOf(h, "message.failed", (d) => d.messageId === res.body.id);
      return list.length ? list : undefined;
    }, 20_000);
    expect(failed[0].data.error).to.deep.equal({ code: "contact_opted_out", title: "The contact opted out on this channel before the message was sent" });
    expect(providerRequestsFor(h, res.body.id).every((c) => c.responseStatus === 503), "only the failed calls before the opt-out").to.equal(true);
    expect(eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)).to.have.length(0);
  });

  it("an attempt that waited for its pacing slot checks the opt-out again before the provider call; one that did not wait does not", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const ctx = contextOf((h.svc as unknown as { deps: Parameters<typeof contextOf>[0] }).deps);
    const store = async () =>
      (await ctx.writes.store({ id: newId("message"), organizationId: org, channelId: channel.id, contactId: newId("contact"), phone, text: "paced", leaseMs: 15_000 })).message;
    const row = await channelsRepository.findById(ctx.db, org, channel.id);
    // The opt-out is set after the request's own check, while the send waits for its slot.
    await h.contacts.optOut(org, channel.id, phone);
    const paced = await store();
    const outcome = await attemptSend(ctx, paced, { enqueueRetry: true, channel: row!, paceWaitMs: 5 });
    expect(outcome.kind).to.equal("failed");
    expect(providerRequestsFor(h, paced.id)).to.have.length(0);
    // No wait: the request's own check just before it stored the message stands (a second one would cost every send a
    // round trip to contacts). Counted around the real checker; the channel's spacing interval has passed.
    await new Promise((r) => setTimeout(r, 1_000 / row!.messages_per_second + 20));
    const checker = ctx.optOuts;
    const original = checker.isOptedOut;
    let checks = 0;
    checker.isOptedOut = (...args) => {
      checks++;
      return original.apply(checker, args);
    };
    try {
      const direct = await store();
      await attemptSend(ctx, direct, { enqueueRetry: true, channel: row!, paceWaitMs: 0 });
    } finally {
      checker.isOptedOut = original;
    }
    expect(checks, "no second check").to.equal(0);
  });

  it("a send without a key whose caller left before the provider call ends cancelled, never sent; one whose caller stayed is sent", async () => {
    const { org, channel, phone, ctx } = await windowOpen();
    // What the route passes for a request without an Idempotency-Key whose connection closed (the gateway answered 503).
    const left = await sendMessage(ctx, org, { to: phone, text: "nobody waits", messagingChannelId: channel.id }, newId("message"), () => true).then(
      () => expect.fail("answered as sent"),
      (err: ApiError) => err,
    );
    expect([left.status, left.code]).to.deep.equal([503, "SERVICE_UNAVAILABLE"]);
    const [row] = await ctx.db.query(`SELECT id, status, error_code FROM messaging.messages WHERE organization_id = $1 AND text = 'nobody waits'`, [org]);
    expect([row.status, row.error_code]).to.deep.equal(["cancelled", "request_abandoned"]);
    expect(providerRequestsFor(h, row.id)).to.have.length(0);
    // The caller still there: sent.
    const stayed = await sendMessage(ctx, org, { to: phone, text: "someone waits", messagingChannelId: channel.id }, newId("message"), () => false);
    expect(stayed.body.providerMessageId).to.be.a("string");
    expect(eventsOf(h, "message.sent", (d) => d.messageId === row.id), "no event for the cancelled send").to.have.length(0);
  });

  it("a request whose attempt fails unexpectedly answers 200 only once the worker owns the send, which sends it once", async () => {
    const { org, channel, phone, ctx } = await windowOpen();
    const spacer = ctx.spacer;
    const original = spacer.turn;
    let failed = 0;
    // The attempt breaks after storing the message and before its provider call (once, for this channel only).
    spacer.turn = function (channelId, ...rest) {
      if (channelId === channel.id && failed++ === 0) return Promise.reject(new Error("unexpected"));
      return original.call(this, channelId, ...rest);
    };
    try {
      const res = await sendMessage(ctx, org, { to: phone, text: "handed over", messagingChannelId: channel.id });
      expect([res.status, res.body.providerMessageId]).to.deep.equal([200, null]);
      // Sent by the worker's attempt (the second): not left under its request's lease, which the sweep would take for a
      // send whose request died unanswered, and cancel.
      await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === res.body.id).length === 1, 20_000);
      expect(providerRequestsFor(h, res.body.id)).to.have.length(1);
      const [row] = await ctx.db.query(`SELECT attempts FROM messaging.messages WHERE id = $1`, [res.body.id]);
      expect(row.attempts).to.equal(2);
    } finally {
      spacer.turn = original;
    }
  });

  it("a send whose opt-out came while it waited in its request for a pacing slot answers 403 CONTACT_OPTED_OUT, never sent", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 1 });
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const ctx = contextOf((h.svc as unknown as { deps: Parameters<typeof contextOf>[0] }).deps);
    // The channel's next slot is taken: the send waits about a second in its request.
    await reservePacingSlots(ctx.db, channel.id);
    // The opt-out lands right after the request's own check answered "not opted out".
    const checker = ctx.optOuts;
    const original = checker.isOptedOut;
    let first = true;
    checker.isOptedOut = async (...args) => {
      const answer = await original.apply(checker, args);
      if (first && args[2] === phone) {
        first = false;
        await h.contacts.optOut(org, channel.id, phone);
      }
      return answer;
    };
    let res;
    try {
      res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "waits, then opted out", messagingChannelId: channel.id });
    } finally {
      checker.isOptedOut = original;
    }
    expect(res.status, JSON.stringify(res.body)).to.equal(403);
    expect(res.body.error).to.deep.equal({ code: "CONTACT_OPTED_OUT", message: "Contact opted out" });
    const [row] = await ctx.db.query(`SELECT id, status, error_code FROM messaging.messages WHERE organization_id = $1 AND direction = 'outbound'`, [org]);
    expect(row).to.include({ status: "failed", error_code: "contact_opted_out" });
    expect(providerRequestsFor(h, row.id)).to.have.length(0);
  });

  it("503 when the opt-out check cannot be answered (fails closed), nothing sent", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const before = requestsOn(channel);
    await h.contacts.setDown(true);
    try {
      const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "hi" });
      expect(res.status).to.equal(503);
      expect(res.body.error.code).to.equal("SERVICE_UNAVAILABLE");
    } finally {
      await h.contacts.setDown(false);
    }
    expect(requestsOn(channel)).to.equal(before);
  });

  it("400 OUTSIDE_SERVICE_WINDOW without an inbound message, or when the last one is older than 24 h", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const never = await api(h, org).post("/api/v1/messages").send({ to: uniquePhone(), text: "hi" });
    expect(never.status).to.equal(400);
    expect(never.body.error.code).to.equal("OUTSIDE_SERVICE_WINDOW");

    const phone = uniquePhone();
    await receiveInbound(h, channel, phone, { timestamp: Math.floor(Date.now() / 1000) - 25 * 3600 });
    const old = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "hi" });
    expect(old.status).to.equal(400);
    expect(old.body.error.code).to.equal("OUTSIDE_SERVICE_WINDOW");
    expect(requestsOn(channel)).to.equal(0);

    // An inbound on another channel does not open this channel's window.
    const other = await createChannel(h, org);
    const phone2 = uniquePhone();
    await receiveInbound(h, other, phone2);
    const wrongChannel = await api(h, org).post("/api/v1/messages").send({ to: phone2, text: "hi", messagingChannelId: channel.id });
    expect(wrongChannel.body.error.code).to.equal("OUTSIDE_SERVICE_WINDOW");

    // 23 hours ago is inside.
    await receiveInbound(h, channel, phone, { timestamp: Math.floor(Date.now() / 1000) - 23 * 3600 });
    const inside = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "hi" });
    expect(inside.status).to.equal(200);
  });

  it("400 UPSTREAM_REJECTED on a permanent provider error: stored failed, message.failed emitted, no retry", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "error", httpStatus: 400, code: 131047, message: "Re-engagement message", times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "rejected" });
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal("UPSTREAM_REJECTED");
    const failed = await eventually(() => {
      const list = eventsOf(h, "message.failed", (d) => d.phone === phone);
      return list.length ? list : undefined;
    });
    expect(failed).to.have.length(1);
    expect(failed[0].data).to.include({ status: "failed", messagingChannelId: channel.id, providerMessageId: null });
    expect(failed[0].data.error).to.deep.equal({ code: "131047", title: "Re-engagement message" });
    // `failed` is final: no worker retries it (it takes pending messages only), so the one call stays the only one.
    const [row] = await contextOf((h.svc as unknown as { deps: Parameters<typeof contextOf>[0] }).deps).db.query(`SELECT status, next_attempt_at FROM messaging.messages WHERE id = $1`, [failed[0].data.messageId]);
    expect(row).to.deep.equal({ status: "failed", next_attempt_at: null });
    expect(providerRequestsFor(h, failed[0].data.messageId)).to.have.length(1);
    expect(requestsOn(channel)).to.equal(1);
    expect(eventsOf(h, "message.sent", (d) => d.messageId === failed[0].data.messageId)).to.have.length(0);
  });
});
