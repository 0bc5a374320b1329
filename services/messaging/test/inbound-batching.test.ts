import { expect } from "chai";
import { Client } from "pg";
import { STREAMS, SUBJECTS } from "@platform/contracts";
import { eventually } from "@platform/testing";
import { createChannel, eventsOf, newOrg, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

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
