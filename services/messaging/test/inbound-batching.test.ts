import { expect } from "chai";
import { Client } from "pg";
import { CONTACTS_RPC, STREAMS, SUBJECTS } from "@platform/contracts";
import type { MessagingDeps } from "../src/context";
import { contextOf } from "../src/service";
import { resolveContacts } from "../src/use-cases/contacts";
import { processProviderBatch, Turns } from "../src/use-cases/process-provider-batch";
import { eventually } from "@platform/testing";
import { api, createChannel, eventsOf, messagesBatch, newOrg, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

/**
 * The inbound batch is written set-based (one statement per kind of row).
 * Under concurrent redelivery of overlapping batches (different bytes, so the
 * bus' duplicate window does not hide them), every provider message is stored
 * once, emits `message.received` once, each contact gets one conversation
 * (opened once) and its service window ends at its latest message.
 */
describe("provider inbound batches under concurrent redelivery", () => {
  let h: Harness;
  let db: Client;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
    db = new Client({ connectionString: h.env.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
  });

  it("overlapping batches consumed concurrently store each message once, with one conversation and one event each", async function () {
    this.timeout(60_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phones = Array.from({ length: 6 }, () => uniquePhone());
    const base = Math.floor(Date.now() / 1000) - 3_600;
    const messages = Array.from({ length: 30 }, (_, k) => ({
      from: phones[k % phones.length].slice(1),
      id: `wamid.batching.${org}.${k}`,
      timestamp: String(base + k),
      type: "text",
      text: { body: `m${k}` },
    }));
    // 12 batches of 10 consecutive messages (wrapping), each message in 4 batches; the first also repeats a message inside itself.
    const batches = Array.from({ length: 12 }, (_, b) => {
      const picked = Array.from({ length: 10 }, (_, j) => messages[(b * 10 + j) % messages.length]);
      if (b === 0) picked.push(picked[0]);
      return {
        object: "whatsapp_business_account",
        entry: [{ id: "waba", changes: [{ field: "messages", value: { metadata: { phone_number_id: channel.providerPhoneNumberId }, messages: picked } }] }],
      };
    });
    await Promise.all(
      batches.map((body, b) =>
        h.bus.publish(SUBJECTS.providerInbound.subject, { body: JSON.stringify(body, null, b % 3), receivedAt: new Date().toISOString() }, { msgId: `${org}-${b}` }),
      ),
    );

    const ids = new Set(messages.map((m) => m.id));
    await eventually(async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM messaging.messages WHERE channel_id = $1 AND direction = 'inbound'`, [channel.id]);
      return rows[0].n === messages.length;
    }, 30_000);
    // Every batch handled and acknowledged, every event relayed.
    await eventually(async () => {
      const info = await h.bus.jsm.consumers.info(h.bus.streamName(STREAMS.provider), "messaging-provider-inbound");
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM messaging.outbox`);
      return info.num_pending === 0 && info.num_ack_pending === 0 && rows[0].n === 0;
    }, 30_000);
    await eventually(() => eventsOf(h, "message.received", (d) => ids.has(d.providerMessageId)).length >= messages.length, 10_000);

    const { rows: stored } = await db.query(
      `SELECT provider_message_id, count(*)::int AS n FROM messaging.messages WHERE channel_id = $1 AND direction = 'inbound' GROUP BY 1`,
      [channel.id],
    );
    expect(stored).to.have.length(messages.length);
    expect(stored.every((r) => r.n === 1)).to.equal(true);

    const received = eventsOf(h, "message.received", (d) => ids.has(d.providerMessageId));
    expect(received.map((e) => e.data.providerMessageId).sort()).to.deep.equal([...ids].sort());
    const { rows: conversations } = await db.query(`SELECT id, phone FROM messaging.conversations WHERE channel_id = $1`, [channel.id]);
    expect(conversations.map((c) => c.phone).sort()).to.deep.equal([...phones].sort());
    const conversationOf = new Map(conversations.map((c) => [c.phone, c.id]));
    for (const e of received) expect(e.data.conversationId).to.equal(conversationOf.get(e.data.phone));
    const opened = eventsOf(h, "conversation.opened", (d) => d.messagingChannelId === channel.id);
    expect(opened.map((e) => e.data.conversationId).sort()).to.deep.equal(conversations.map((c) => c.id).sort());

    const { rows: windows } = await db.query(`SELECT phone, last_inbound_at FROM messaging.service_windows WHERE channel_id = $1`, [channel.id]);
    expect(windows).to.have.length(phones.length);
    for (const w of windows) {
      const latest = Math.max(...messages.filter((m) => `+${m.from}` === w.phone).map((m) => Number(m.timestamp)));
      expect(new Date(w.last_inbound_at).getTime()).to.equal(latest * 1000);
    }
  });
});

/**
 * Statuses are applied by one set-based UPDATE per batch with the
 * forward-only rules in SQL. The same statuses redelivered concurrently in
 * several batches (different bytes, orders and companions) move each message
 * once: one `message.delivered` and one `message.read` each, none after.
 */
describe("provider status batches under concurrent redelivery", () => {
  let h: Harness;
  let db: Client;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
    db = new Client({ connectionString: h.env.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
  });

  it("each transition is applied and emitted once; final states never move; a pending message that jumps ahead gets its sent", async function () {
    this.timeout(60_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phones = Array.from({ length: 4 }, () => uniquePhone());
    for (const p of phones) await receiveInbound(h, channel, p);
    h.sim.setWebhookUrl(undefined);
    const sent: Array<{ id: string; providerMessageId: string; phone: string }> = [];
    try {
      for (let k = 0; k < 12; k++) {
        const res = await api(h, org).post("/api/v1/messages").send({ to: phones[k % phones.length], text: `s${k}` });
        expect(res.status).to.equal(200);
        sent.push({ id: res.body.id, providerMessageId: res.body.providerMessageId, phone: phones[k % phones.length] });
      }
    } finally {
      h.sim.setWebhookUrl(h.webhookUrl);
    }
    // One message is put back to pending (its send answer "not stored yet"): delivered makes it sent, then delivered.
    await db.query(`UPDATE messaging.messages SET status = 'pending' WHERE id = $1`, [sent[0].id]);
    const status = (m: (typeof sent)[number], s: string, byOurId: boolean) => ({
      id: m.providerMessageId,
      status: s,
      timestamp: String(Math.floor(Date.now() / 1000)),
      recipient_id: m.phone.slice(1),
      ...(byOurId ? { biz_opaque_callback_data: m.id } : {}),
    });
    // Eight batches, each with sent, delivered, read for every message in order (by our id or the provider's), a late
    // delivered and a failed after read; messages in a different order per batch.
    const batches = Array.from({ length: 8 }, (_, b) => {
      const order = b % 2 ? [...sent].reverse() : sent;
      const statuses = order.flatMap((m) => [status(m, "sent", b % 3 === 0), status(m, "delivered", b % 3 === 1), status(m, "read", b % 3 === 2)]);
      statuses.push(status(sent[1], "delivered", false), status(sent[2], "failed", true));
      return {
        object: "whatsapp_business_account",
        entry: [{ id: "waba", changes: [{ field: "messages", value: { metadata: { phone_number_id: channel.providerPhoneNumberId }, statuses } }] }],
      };
    });
    await Promise.all(
      batches.map((body, b) =>
        h.bus.publish(SUBJECTS.providerInbound.subject, { body: JSON.stringify(body, null, b % 3), receivedAt: new Date().toISOString() }, { msgId: `${org}-st-${b}` }),
      ),
    );
    const ids = new Set(sent.map((m) => m.id));
    await eventually(async () => {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM messaging.messages WHERE id = ANY($1) AND status = 'read'`, [[...ids]]);
      return rows[0].n === sent.length;
    }, 30_000);
    await eventually(async () => {
      const info = await h.bus.jsm.consumers.info(h.bus.streamName(STREAMS.provider), "messaging-provider-inbound");
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM messaging.outbox`);
      return info.num_pending === 0 && info.num_ack_pending === 0 && rows[0].n === 0;
    }, 30_000);
    await eventually(() => eventsOf(h, "message.read", (d) => ids.has(d.messageId)).length >= sent.length, 10_000);

    for (const type of ["message.delivered", "message.read"]) {
      const events = eventsOf(h, type, (d) => ids.has(d.messageId));
      expect(events.map((e) => e.data.messageId).sort(), type).to.deep.equal([...ids].sort());
    }
    // The pending one got exactly one sent from the statuses; the others had theirs from the send and get none more.
    expect(eventsOf(h, "message.sent", (d) => d.messageId === sent[0].id)).to.have.length(2);
    for (const m of sent.slice(1)) expect(eventsOf(h, "message.sent", (d) => d.messageId === m.id)).to.have.length(1);
    expect(eventsOf(h, "message.failed", (d) => ids.has(d.messageId))).to.have.length(0);
    const { rows } = await db.query(`SELECT id, status, provider_message_id FROM messaging.messages WHERE id = ANY($1)`, [[...ids]]);
    for (const r of rows) expect(r).to.deep.equal({ id: r.id, status: "read", provider_message_id: sent.find((m) => m.id === r.id)!.providerMessageId });
  });
});

/**
 * The provider sends a message's `delivered` and `read` in separate batches, in
 * that order, and the bus hands them over in that order; the consumer handles
 * several batches at once. Each batch first looks its channel up (a query when
 * it is not in memory), so the second could reach the group commit first: its
 * `read` would then make the `delivered` a late status, and `message.delivered`
 * would never be emitted. Statuses of one number go to the group commit in the
 * order their batches were handed over.
 */
describe("status batches of one number keep their order through the handler", () => {
  it("the `read` of the second batch waits for the `delivered` of the first, whose channel look-up took longer", async function () {
    this.timeout(60_000);
    const h = await sharedHarness();
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setWebhookUrl(undefined);
    const sent: Array<{ id: string; providerMessageId: string }> = [];
    try {
      for (let k = 0; k < 3; k++) {
        const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: `o${k}` });
        expect(res.status).to.equal(200);
        sent.push(res.body);
      }
    } finally {
      h.sim.setWebhookUrl(h.webhookUrl);
    }
    const batch = (status: string) =>
      JSON.stringify(
        messagesBatch(channel.providerPhoneNumberId, {
          statuses: sent.map((m) => ({ id: m.providerMessageId, status, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: phone.slice(1), biz_opaque_callback_data: m.id })),
        }),
      );

    // The first batch's channel look-up answers only after the second's has (a slow query on a cold cache).
    const ctx = contextOf(h.svc.deps as MessagingDeps);
    const original = ctx.lookups.forProviderNumber;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    let secondAnswered = false;
    ctx.lookups.forProviderNumber = async (id: string) => {
      const call = ++calls;
      if (call === 1) await held;
      const row = await original.call(ctx.lookups, id);
      if (call === 2) secondAnswered = true;
      return row;
    };
    try {
      const first = processProviderBatch(ctx, batch("delivered"));
      const second = processProviderBatch(ctx, batch("read"));
      await eventually(() => secondAnswered, 10_000);
      release();
      await Promise.all([first, second]);
    } finally {
      ctx.lookups.forProviderNumber = original;
      release();
    }

    const ids = new Set(sent.map((m) => m.id));
    await eventually(() => eventsOf(h, "message.read", (d) => ids.has(d.messageId)).length === sent.length, 10_000);
    for (const type of ["message.delivered", "message.read"]) {
      expect(eventsOf(h, type, (d) => ids.has(d.messageId)).map((e) => e.data.messageId).sort(), type).to.deep.equal([...ids].sort());
    }
  });

  it("Turns: each turn of a key is ready once every earlier one of that key was released; keys are apart", async () => {
    const turns = new Turns();
    const order: string[] = [];
    const a1 = turns.take("a");
    const a2 = turns.take("a");
    const b1 = turns.take("b");
    const a3 = turns.take("a");
    for (const [name, t] of [["a2", a2], ["a3", a3], ["b1", b1], ["a1", a1]] as const) void t.ready.then(() => order.push(name));
    await new Promise((r) => setImmediate(r));
    expect(order.sort()).to.deep.equal(["a1", "b1"]);
    a2.release(); // released before its turn: a3 still waits for a1
    await new Promise((r) => setImmediate(r));
    expect(order).to.not.include("a3");
    a1.release();
    a1.release();
    await new Promise((r) => setImmediate(r));
    expect(order).to.include.members(["a2", "a3"]);
    a3.release();
    b1.release();
    await new Promise((r) => setImmediate(r));
    expect(turns.size).to.equal(0);
  });
});

/**
 * The contacts of concurrently handled inbound batches of one organization go
 * in one `resolve-many` request; each batch gets its own ids, and a batch the
 * contacts service refuses fails alone.
 */
describe("inbound contacts resolved together across concurrent batches", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  /** Counts the resolve-many requests on the bus while `fn` runs (a plain subscriber sees every request). */
  async function countingRequests<T>(fn: () => Promise<T>): Promise<{ result: T; requests: number }> {
    const sub = h.bus.nc.subscribe(h.bus.subject(CONTACTS_RPC.resolveContacts.subject));
    let requests = 0;
    const counted = (async () => {
      for await (const _ of sub) requests++;
    })();
    await h.bus.nc.flush();
    const result = await fn();
    await h.bus.nc.flush();
    sub.unsubscribe();
    await counted;
    return { result, requests };
  }

  it("batches resolved in the same turn go in one request, each answered with its own contacts", async () => {
    const org = newOrg();
    const batches = Array.from({ length: 5 }, () => [uniquePhone(), uniquePhone()]);
    batches[4].push(batches[0][0]); // a number in two batches: one contact
    const { result, requests } = await countingRequests(() =>
      Promise.all(batches.map((phones) => resolveContacts(h.bus, { organizationId: org, phones, names: phones.map(() => null), waIds: phones.map(() => null) }))),
    );
    expect(requests).to.equal(1);
    for (let b = 0; b < batches.length; b++) {
      for (const phone of batches[b]) expect(result[b].get(phone)).to.equal((await h.contacts.contactOf(org, phone))?.id);
    }
    expect(result[4].get(batches[0][0])).to.equal(result[0].get(batches[0][0]));
  });

  it("a batch the contacts service refuses fails alone; the others of its group are answered", async () => {
    const org = newOrg();
    const good = [[uniquePhone()], [uniquePhone()]];
    const outcomes = await Promise.allSettled([
      resolveContacts(h.bus, { organizationId: org, phones: good[0], names: [null], waIds: [null] }),
      resolveContacts(h.bus, { organizationId: org, phones: ["not-a-phone"], names: [null], waIds: [null] }),
      resolveContacts(h.bus, { organizationId: org, phones: good[1], names: [null], waIds: [null] }),
    ]);
    expect(outcomes.map((o) => o.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled"]);
    for (const [k, o] of [outcomes[0], outcomes[2]].entries()) {
      const phone = good[k][0];
      expect((o as PromiseFulfilledResult<Map<string, string>>).value.get(phone)).to.equal((await h.contacts.contactOf(org, phone))?.id);
    }
  });
});
