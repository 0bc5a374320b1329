import { expect } from "chai";
import { MessageRecord, MESSAGING_SUBJECTS } from "@platform/contracts";
import { startService } from "@platform/service";
import { collectSubject, eventually } from "@platform/testing";
import { newId } from "@platform/id";
import { contextOf, definition, reservePacingSlots } from "../src/service";
import { messageStatusEvent } from "../src/use-cases/events";
import { sendMessage } from "../src/use-cases/send-message";
import { SendWrites } from "../src/use-cases/send-writes";
import {
  api,
  createChannel,
  eventsOf,
  newOrg,
  providerRequestsFor,
  receiveInbound,
  serviceEnv,
  sharedHarness,
  startHarness,
  uniquePhone,
  type Harness,
} from "./helpers/harness";

describe("POST /api/v1/messages (happy paths)", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  it("concurrent first sends to new numbers share one contacts request and one channel/window query", async function () {
    this.timeout(60_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phones = Array.from({ length: 12 }, () => uniquePhone());
    for (const phone of phones) await receiveInbound(h, channel, phone);
    const ctx = contextOf((h.svc as unknown as { deps: Parameters<typeof contextOf>[0] }).deps);
    const [contactRequests, lookupQueries] = [ctx.contactResolver.requests, ctx.lookups.queries];
    // All in one event-loop turn (the use case itself, as the route calls it): none of these numbers has a cached
    // contact or window, nor the new organization a cached channel.
    const answers = await Promise.all(phones.map((to) => sendMessage(ctx, org, { to, text: "first" })));
    for (const [k, res] of answers.entries()) {
      expect(res.status).to.equal(200);
      // Each its own contact, the one the contacts service has for the number.
      expect(res.body.contactId).to.equal((await h.contacts.contactOf(org, phones[k]))!.id);
      expect(providerRequestsFor(h, res.body.id)).to.have.length(1);
    }
    expect(new Set(answers.map((r) => r.body.contactId)).size).to.equal(12);
    // One round trip for the batch of concurrent sends, not one per number.
    expect(ctx.contactResolver.requests - contactRequests).to.equal(1);
    expect(ctx.lookups.queries - lookupQueries).to.equal(1);
  });

  it("sends a text: exact provider body, answer with ids, message.sent once", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);

    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "Hello there" });
    expect(res.status).to.equal(200);
    expect(res.body).to.have.keys(["id", "conversationId", "contactId", "providerMessageId"]);
    expect(res.body.id).to.match(/^msg_/);
    expect(res.body.conversationId).to.match(/^conv_/);
    expect(res.body.contactId).to.equal((await h.contacts.contactOf(org, phone))!.id);
    expect(res.body.providerMessageId).to.match(/^wamid\./);

    const sent = providerRequestsFor(h, res.body.id);
    expect(sent).to.have.length(1);
    expect(sent[0].phoneNumberId).to.equal(channel.providerPhoneNumberId);
    expect(sent[0].headers.authorization).to.equal("Bearer test-provider-token");
    expect(sent[0].body).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: phone.slice(1),
      type: "text",
      text: { body: "Hello there" },
      biz_opaque_callback_data: res.body.id,
    });

    const ev = await eventually(() => {
      const list = eventsOf(h, "message.sent", (d) => d.messageId === res.body.id);
      return list.length ? list : undefined;
    });
    expect(ev).to.have.length(1);
    expect(ev[0].organizationId).to.equal(org);
    expect(ev[0].data).to.include({
      messageId: res.body.id,
      conversationId: res.body.conversationId,
      contactId: res.body.contactId,
      messagingChannelId: channel.id,
      phone,
      status: "sent",
      providerMessageId: res.body.providerMessageId,
    });
    expect(ev[0].data.id).to.match(/^evt_/);
  });

  it("follows the simulator's statuses to delivered and read, each emitted once", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "status please" });
    expect(res.status).to.equal(200);
    await eventually(() => eventsOf(h, "message.read", (d) => d.messageId === res.body.id).length === 1);
    await h.sim.idle();
    await new Promise((r) => setTimeout(r, 300));
    for (const type of ["message.sent", "message.delivered", "message.read"]) {
      const list = eventsOf(h, type, (d) => d.messageId === res.body.id);
      expect(list, type).to.have.length(1);
      expect(list[0].data.status).to.equal(type.split(".")[1]);
      expect(list[0].data.providerMessageId).to.equal(res.body.providerMessageId);
    }
    expect(eventsOf(h, "message.failed", (d) => d.messageId === res.body.id)).to.have.length(0);
  });

  it("maps phone variants to one contact and reuses the open conversation", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone(); // +1415XXXXXXX
    await receiveInbound(h, channel, phone);
    const digits = phone.slice(1);
    const variants = [
      phone,
      digits,
      `00${digits}`,
      `+1 (${digits.slice(1, 4)}) ${digits.slice(4, 7)}-${digits.slice(7)}`,
      `+1.${digits.slice(1, 4)}.${digits.slice(4, 7)}.${digits.slice(7)}`,
    ];
    const answers: Array<{ id: string; contactId: string; conversationId: string }> = [];
    for (const to of variants) {
      const res = await api(h, org).post("/api/v1/messages").send({ to, text: "variant" });
      expect(res.status, to).to.equal(200);
      answers.push(res.body);
    }
    expect(new Set(answers.map((a) => a.contactId)).size).to.equal(1);
    expect(new Set(answers.map((a) => a.conversationId)).size).to.equal(1);
    for (const a of answers) expect((providerRequestsFor(h, a.id)[0].body as { to: string }).to).to.equal(digits);
    const opened = eventsOf(h, "conversation.opened", (d) => d.conversationId === answers[0].conversationId);
    await eventually(() => eventsOf(h, "conversation.opened", (d) => d.conversationId === answers[0].conversationId).length === 1);
    expect(opened.length).to.be.at.most(1);
  });

  it("stores concurrent sends together: one conversation per contact, every message once", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phones = [uniquePhone(), uniquePhone(), uniquePhone()];
    for (const p of phones) await receiveInbound(h, channel, p);
    // 24 sends at once, 8 to each number: they share batches, with repeats of one contact in the same batch.
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) => api(h, org).post("/api/v1/messages").send({ to: phones[i % 3], text: `burst ${i}` })),
    );
    for (const a of answers) expect(a.status).to.equal(200);
    expect(new Set(answers.map((a) => a.body.id)).size).to.equal(24);
    for (const p of phones) {
      const mine = answers.filter((_, i) => phones[i % 3] === p);
      expect(new Set(mine.map((a) => a.body.conversationId)).size, p).to.equal(1);
      expect(new Set(mine.map((a) => a.body.contactId)).size, p).to.equal(1);
    }
    for (const a of answers) {
      await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === a.body.id).length === 1);
      expect(providerRequestsFor(h, a.body.id).filter((r) => r.responseStatus === 200)).to.have.length(1);
    }
  });

  it("uses the default channel when none is given, and an explicit one when given", async () => {
    const org = newOrg();
    const first = await createChannel(h, org, { name: "first" });
    const second = await createChannel(h, org, { name: "second" });
    expect(first.isDefault).to.equal(true);
    expect(second.isDefault).to.equal(false);
    const phone = uniquePhone();
    await receiveInbound(h, first, phone);
    await receiveInbound(h, second, phone);

    const viaDefault = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "default" });
    expect(viaDefault.status).to.equal(200);
    expect(providerRequestsFor(h, viaDefault.body.id)[0].phoneNumberId).to.equal(first.providerPhoneNumberId);

    const explicit = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "explicit", messagingChannelId: second.id });
    expect(explicit.status).to.equal(200);
    expect(providerRequestsFor(h, explicit.body.id)[0].phoneNumberId).to.equal(second.providerPhoneNumberId);
    expect(explicit.body.conversationId).to.not.equal(viaDefault.body.conversationId);
    expect(explicit.body.contactId).to.equal(viaDefault.body.contactId);
  });

  it("an unmarked default moves to the first channel created (shown in the list); an organization's only channel stays default", async () => {
    const org = newOrg();
    const first = await createChannel(h, org, { name: "first" });
    const second = await createChannel(h, org, { name: "second", isDefault: true });
    const phone = uniquePhone();
    await receiveInbound(h, first, phone);
    await receiveInbound(h, second, phone);
    const sendVia = async () => {
      const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "which channel?" });
      expect(res.status).to.equal(200);
      return providerRequestsFor(h, res.body.id)[0].phoneNumberId;
    };
    expect(await sendVia()).to.equal(second.providerPhoneNumberId);
    const cleared = await api(h, org).patch(`/admin/v1/organizations/${org}/channels/${second.id}`).send({ isDefault: false });
    expect(cleared.body.isDefault).to.equal(false);
    expect(await sendVia()).to.equal(first.providerPhoneNumberId);
    // The list names the channel a send without messagingChannelId uses: exactly one default.
    const list = await api(h, org).get(`/admin/v1/organizations/${org}/channels`);
    expect(list.body.items.map((c: { id: string; isDefault: boolean }) => [c.id, c.isDefault])).to.deep.equal([[first.id, true], [second.id, false]]);

    const alone = newOrg();
    const only = await createChannel(h, alone, { name: "only" });
    const kept = await api(h, alone).patch(`/admin/v1/organizations/${alone}/channels/${only.id}`).send({ isDefault: false });
    expect([kept.status, kept.body.isDefault]).to.deep.equal([200, true]);
  });

  it("sees channel changes at once on this replica and within a second on another (cached channels)", async () => {
    const replica2 = await startService(definition, serviceEnv(h.env, h.sim.url), { exitOnConfigError: false });
    try {
      const other = { ...h, svc: replica2 as Harness["svc"] };
      const org = newOrg();
      // The "within a second" is met by the mechanism, not timed here (a busy machine stretches any wall-clock bound):
      // each change is broadcast, and the other replica, whose cache would keep the old channel for 5 s, follows it.
      const broadcasts: string[] = [];
      h.bus.onBroadcast(MESSAGING_SUBJECTS.channelsChanged, ({ organizationId }) => {
        if (organizationId === org) broadcasts.push(organizationId);
      });
      const first = await createChannel(h, org, { name: "first" });
      const second = await createChannel(h, org, { name: "second" });
      const phone = uniquePhone();
      await receiveInbound(h, first, phone);
      await receiveInbound(h, second, phone);
      const send = (via: Harness) => api(via, org).post("/api/v1/messages").send({ to: phone, text: "hi" });

      // Both replicas have the default channel cached.
      for (const via of [h, other]) {
        const res = await send(via);
        expect(res.status).to.equal(200);
        expect(providerRequestsFor(h, res.body.id)[0].phoneNumberId).to.equal(first.providerPhoneNumberId);
      }

      let seen = broadcasts.length;
      await api(h, org).patch(`/admin/v1/organizations/${org}/channels/${second.id}`).send({ isDefault: true }).expect(200);
      const here = await send(h);
      expect(providerRequestsFor(h, here.body.id)[0].phoneNumberId).to.equal(second.providerPhoneNumberId);
      await eventually(() => broadcasts.length > seen);
      await eventually(async () => {
        const there = await send(other);
        return providerRequestsFor(h, there.body.id)[0]?.phoneNumberId === second.providerPhoneNumberId;
      });

      seen = broadcasts.length;
      await api(h, org).patch(`/admin/v1/organizations/${org}/channels/${second.id}`).send({ connected: false }).expect(200);
      expect((await send(h)).body.error?.code).to.equal("PROVIDER_NOT_CONNECTED");
      await eventually(() => broadcasts.length > seen);
      await eventually(async () => (await send(other)).body.error?.code === "PROVIDER_NOT_CONNECTED");
    } finally {
      await replica2.stop();
    }
  });

  it("two replicas sending to the same contacts at once: every send 200, one conversation per contact, slots never shared", async function () {
    this.timeout(30_000);
    const replica2 = await startService(definition, serviceEnv(h.env, h.sim.url), { exitOnConfigError: false });
    try {
      const other = { ...h, svc: replica2 as Harness["svc"] };
      const org = newOrg();
      // 50 per second: the 60 sends' slots (1.2 s) stay within the request's pacing budget, and the timeline runs ahead
      // of the requests, so a reservation that took fewer intervals than sends would show.
      const channel = await createChannel(h, org, { messagesPerSecond: 50 });
      const phones = Array.from({ length: 6 }, () => uniquePhone());
      for (const p of phones) await receiveInbound(h, channel, p);
      // A marker slot on the channel's timeline (the GCRA row) right before the sends, and one right after.
      const before = (await reservePacingSlots(h.svc.deps.db, channel.id))!;
      // Each replica gets the numbers in the opposite order.
      const answers = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          i % 2 === 0
            ? api(h, org).post("/api/v1/messages").send({ to: phones[(i >> 1) % 6], text: `a ${i}` })
            : api(other, org).post("/api/v1/messages").send({ to: phones[5 - ((i >> 1) % 6)], text: `b ${i}` }),
        ),
      );
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).to.equal(200);
      const rows = await h.svc.deps.db.query(
        `SELECT contact_id, count(DISTINCT conversation_id)::int AS conversations, count(*)::int AS messages
         FROM messaging.messages WHERE organization_id = $1 AND direction = 'outbound' GROUP BY contact_id`,
        [org],
      );
      expect(rows).to.have.length(6);
      for (const r of rows) expect(r).to.include({ conversations: 1, messages: 10 });
      const after = (await reservePacingSlots(h.svc.deps.db, channel.id))!;
      // Between the markers the 60 sends took 60 intervals of 20 ms on the channel's timeline, whichever replica
      // reserved them: no slot shared (what the pacer decided, not wall-clock gaps).
      expect(before.intervalMs).to.equal(20);
      expect(after.firstAt - (before.firstAt + before.intervalMs)).to.be.at.least(60 * 20 - 0.01);
    } finally {
      await replica2.stop();
    }
  });

  it("keeps an accepted attempt's sent mark when a store sharing its batch fails", async () => {
    const db = h.svc.deps.db;
    const writes = new SendWrites(db);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const input = (text: string) => ({ id: newId("message"), organizationId: org, channelId: channel.id, contactId: newId("contact"), phone: uniquePhone(), text, leaseMs: 5_000 });
    const { message } = await writes.store(input("first"));
    expect(message.status).to.equal("pending");
    // Submitted in one event-loop turn, the two share one batch (one statement).
    const broken = writes.store(input("text Postgres refuses: \u0000"));
    const sent = { ...message, status: "sent" as const, provider_message_id: "wamid.ok" };
    const mark = writes.markSent({ id: message.id, attempt: 1, providerMessageId: "wamid.ok", event: messageStatusEvent(sent, "sent") });
    const [brokenResult, markResult] = await Promise.allSettled([broken, mark]);
    expect(brokenResult.status).to.equal("rejected");
    expect(markResult).to.deep.equal({ status: "fulfilled", value: true });
    const rows = await db.query(`SELECT status, provider_message_id FROM messaging.messages WHERE id = $1`, [message.id]);
    expect(rows[0]).to.deep.equal({ status: "sent", provider_message_id: "wamid.ok" });

    // A contact repeated in a batch goes in a second statement; when that one fails, the first stands.
    const good = input("first to this contact");
    const repeat = { ...input("same contact, refused: \u0000"), contactId: good.contactId, phone: good.phone };
    const [goodResult, repeatResult] = await Promise.allSettled([writes.store(good), writes.store(repeat)]);
    expect(goodResult.status).to.equal("fulfilled");
    expect(repeatResult.status).to.equal("rejected");
    const stored = await db.query(`SELECT id FROM messaging.messages WHERE contact_id = $1`, [good.contactId]);
    expect(stored.map((r: { id: string }) => r.id)).to.deep.equal([good.id]);
  });

  it("answers 200 with providerMessageId null on a transient failure, then sends in the background", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const pendingFacts = await collectSubject(h.env.natsUrl, `${h.env.namespace}.${MESSAGING_SUBJECTS.messagePending.subject}`);
    try {
      const accepted = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "accepted at once" }).expect(200);
      h.sim.setMode({ kind: "error", httpStatus: 503, code: 1, message: "Service temporarily unavailable", times: 1, phoneNumberId: channel.providerPhoneNumberId });
      const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "retry me" });
      expect(res.status).to.equal(200);
      expect(res.body.providerMessageId).to.equal(null);
      const sent = await eventually(() => {
        const list = eventsOf(h, "message.sent", (d) => d.messageId === res.body.id);
        return list.length ? list : undefined;
      }, 15_000);
      expect(sent[0].data.providerMessageId).to.match(/^wamid\./);
      const calls = providerRequestsFor(h, res.body.id);
      expect(calls.map((c) => c.responseStatus)).to.deep.equal([503, 200]);
      await new Promise((r) => setTimeout(r, 500));
      expect(eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)).to.have.length(1);
      // Analytics learns of the message while it waits (sys.message.pending.v1, once); not of one accepted at once.
      const [row] = await h.svc.deps.db.query(`SELECT created_at FROM messaging.messages WHERE id = $1`, [res.body.id]);
      expect(pendingFacts.received.map((m) => m.data)).to.deep.equal([{ organizationId: org, messageId: res.body.id, createdAt: row.created_at.toISOString() }]);
      expect(pendingFacts.received.map((m) => m.headers["Nats-Msg-Id"])).to.deep.equal([`pending:${res.body.id}`]);
      expect(accepted.body.providerMessageId).to.match(/^wamid\./);
    } finally {
      await pendingFacts.close();
    }
  });

  it("gives up after 24 hours of transient failures: failed with message.failed, no more attempts", async function () {
    this.timeout(20_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "error", httpStatus: 503, code: 2, message: "Service temporarily unavailable", times: 2, phoneNumberId: channel.providerPhoneNumberId });
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "too late" });
    expect(res.status).to.equal(200);
    expect(res.body.providerMessageId).to.equal(null);
    // As if the message had been retried for a day: the next failure is its last.
    await h.svc.deps.db.query(`UPDATE messaging.messages SET created_at = created_at - interval '25 hours' WHERE id = $1`, [res.body.id]);
    const failed = await eventually(() => {
      const list = eventsOf(h, "message.failed", (d) => d.messageId === res.body.id);
      return list.length ? list : undefined;
    }, 15_000);
    expect(failed[0].data.error.code).to.equal("2");
    const [row] = await h.svc.deps.db.query(`SELECT status, attempts FROM messaging.messages WHERE id = $1`, [res.body.id]);
    expect(row).to.deep.equal({ status: "failed", attempts: 2 });
    await new Promise((r) => setTimeout(r, 2_500));
    expect(providerRequestsFor(h, res.body.id).map((c) => c.responseStatus)).to.deep.equal([503, 503]);
    expect(eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)).to.have.length(0);
  });

  it("treats 130429 as transient whatever its HTTP status, and a timeout too", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "error", httpStatus: 400, code: 130429, message: "Rate limit hit", times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const throttled = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "throttled" });
    expect(throttled.status).to.equal(200);
    expect(throttled.body.providerMessageId).to.equal(null);

    h.sim.setMode({ kind: "slow", delayMs: 2_500, times: 1, phoneNumberId: channel.providerPhoneNumberId }); // PROVIDER_TIMEOUT_MS is 1500 in tests
    const slow = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "slow" });
    expect(slow.status).to.equal(200);
    expect(slow.body.providerMessageId).to.equal(null);

    for (const id of [throttled.body.id, slow.body.id]) {
      await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === id).length === 1, 20_000);
    }
  });
  it("GET /api/v1/messages/:id answers the stored message whole, inbound and outbound; another organization's is 404", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const longText = "é".repeat(3_000);
    const at = Math.floor(Date.now() / 1000) - 60;
    const providerId = await receiveInbound(h, channel, phone, { text: longText, timestamp: at });
    const [received] = eventsOf(h, "message.received", (d) => d.providerMessageId === providerId);
    const inbound = await api(h, org).get(`/api/v1/messages/${received.data.messageId}`);
    expect(inbound.status).to.equal(200);
    MessageRecord.parse(inbound.body);
    expect(inbound.body).to.deep.include({
      id: received.data.messageId, direction: "inbound", type: "text", status: "received", text: longText, phone,
      messagingChannelId: channel.id, conversationId: received.data.conversationId, contactId: received.data.contactId,
      providerMessageId: providerId, receivedAt: received.data.receivedAt, templateJobId: null, template: null, error: null, button: null,
    });
    expect(inbound.body.receivedAt).to.equal(new Date(at * 1000).toISOString());

    const sent = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "Thanks" });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
    await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === sent.body.id).length === 1, 10_000);
    const outbound = await api(h, org).get(`/api/v1/messages/${sent.body.id}`);
    expect(outbound.body).to.deep.include({ id: sent.body.id, direction: "outbound", type: "text", status: "sent", text: "Thanks", receivedAt: null, error: null });
    expect(outbound.body.providerMessageId).to.be.a("string");

    const other = await api(h, newOrg()).get(`/api/v1/messages/${sent.body.id}`);
    expect(other.status).to.equal(404);
    expect(other.body.error.code).to.equal("NOT_FOUND");
    expect((await api(h, org).get("/api/v1/messages/msg_nope")).status).to.equal(404);
  });
});

/**
 * The provider accepted a send and reported it `failed` before its answer was recorded (its status callback came
 * first): the caller is answered 200 with the provider's id, as for any accepted send, and the failure is told once by
 * `message.failed`. A 400 UPSTREAM_REJECTED would say the provider refused a message it took.
 */
describe("POST /api/v1/messages: a failure callback that comes before the provider's answer", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    // The provider's answer is held until the test releases it: no call may time out meanwhile.
    h = await startHarness("msgacceptedfailed", { PROVIDER_TIMEOUT_MS: "60000" });
  });
  after(async function () {
    this.timeout(30_000);
    await h.close();
  });

  it("answers 200 with the provider's id, and the message reads failed", async function () {
    this.timeout(60_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "held", times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const answer = api(h, org).post("/api/v1/messages").send({ to: phone, text: "accepted, then failed" }).then((r) => r);
    const call = await eventually(() => h.sim.requests.find((r) => (r.body as any)?.text?.body === "accepted, then failed"), 20_000);
    const messageId = (call.body as { biz_opaque_callback_data: string }).biz_opaque_callback_data;
    await h.sim.injectStatus({ phoneNumberId: channel.providerPhoneNumberId, providerMessageId: call.providerMessageId!, status: "failed", recipientId: phone, callbackData: messageId });
    const failed = await eventually(() => eventsOf(h, "message.failed", (d) => d.messageId === messageId)[0], 20_000);
    expect(failed.data.providerMessageId).to.equal(call.providerMessageId);
    h.sim.release();
    const res = await answer;
    expect([res.status, res.body.id, res.body.providerMessageId]).to.deep.equal([200, messageId, call.providerMessageId]);
    const record = await api(h, org).get(`/api/v1/messages/${messageId}`);
    expect([record.body.status, record.body.providerMessageId]).to.deep.equal(["failed", call.providerMessageId]);
    expect(eventsOf(h, "message.failed", (d) => d.messageId === messageId)).to.have.length(1);
    expect(providerRequestsFor(h, messageId)).to.have.length(1);
  });
});
