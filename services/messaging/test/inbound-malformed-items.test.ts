import { expect } from "chai";
import { Client } from "pg";
import { providerBatchSubject } from "@platform/contracts";
import { createLogger } from "@platform/logging";
import { eventually } from "@platform/testing";
import type { MessagingDeps } from "../src/context";
import { contextOf } from "../src/service";
import { processProviderBatch } from "../src/use-cases/process-provider-batch";
import { api, createChannel, eventsOf, messagesBatch, newOrg, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

/**
 * The gateway answers the provider 200 before messaging reads a batch, so the
 * provider never sends it again: an item messaging cannot read (a message
 * without an id, a status without a status, a malformed entry, change or
 * contact) is skipped alone, and every readable item beside it is handled.
 */
describe("provider batches with unreadable items", () => {
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

  const seconds = (ms = Date.now()) => String(Math.floor(ms / 1000));
  const text = (from: string, id: string, body: string, timestamp: unknown = seconds()) => ({ from, id, timestamp, type: "text", text: { body } });
  const storedInbound = async (channelId: string): Promise<string[]> => {
    const { rows } = await db.query(`SELECT provider_message_id FROM messaging.messages WHERE channel_id = $1 AND direction = 'inbound' ORDER BY 1`, [channelId]);
    return rows.map((r) => r.provider_message_id as string);
  };
  const received = (id: string) => eventually(() => eventsOf(h, "message.received", (d) => d.providerMessageId === id)[0], 10_000);

  it("a message without an id does not drop the valid text beside it: stored, contact resolved, message.received emitted", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const good = `wamid.mix.good.${org}`;
    const status = await h.sim.postRaw(
      messagesBatch(channel.providerPhoneNumberId, {
        // A malformed profile beside the sender's: the sender's name is still read.
        contacts: [null, { wa_id: 15550002222 }, { profile: { name: "Mix" }, wa_id: phone.slice(1) }],
        messages: [text(phone.slice(1), good, "hello"), { from: phone.slice(1), timestamp: seconds(), type: "text", text: { body: "no id" } }],
      }),
    );
    expect(status).to.equal(200);

    const event = await received(good);
    expect(event.organizationId).to.equal(org);
    expect(event.data).to.include({ phone, type: "text", text: "hello", messagingChannelId: channel.id });
    const contact = await h.contacts.contactOf(org, phone);
    expect(contact).to.include({ id: event.data.contactId, name: "Mix", waId: phone.slice(1) });
    // Written in one transaction with the good one: the database holds exactly it.
    expect(await storedInbound(channel.id)).to.deep.equal([good]);
  });

  it("valid messages beside items of unexpected types (text: null, a system message without from, null) are stored; those are not", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const ids = { first: `wamid.ok1.${org}`, second: `wamid.ok2.${org}`, nullText: `wamid.nulltext.${org}`, system: `wamid.system.${org}` };
    const status = await h.sim.postRaw(
      messagesBatch(channel.providerPhoneNumberId, {
        messages: [
          text(phone.slice(1), ids.first, "first"),
          { from: phone.slice(1), id: ids.nullText, timestamp: seconds(), type: "text", text: null },
          { id: ids.system, timestamp: seconds(), type: "system", system: { body: "number changed" } },
          null,
          // Fields messaging does not read, of unexpected types, do not matter.
          { ...text(phone.slice(1), ids.second, "second"), context: 5, button: "not a button" },
        ],
      }),
    );
    expect(status).to.equal(200);

    const events = await eventually(() => {
      const all = eventsOf(h, "message.received", (d) => d.messagingChannelId === channel.id);
      return all.length >= 2 ? all : undefined;
    }, 10_000);
    expect(events.map((e) => e.data.text).sort()).to.deep.equal(["first", "second"]);
    expect(await storedInbound(channel.id)).to.deep.equal([ids.first, ids.second].sort());
  });

  it("a numeric entry id, a malformed entry and a malformed change do not fail the batch: every readable entry is handled, one warning counts the rest", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const ids = { a: `wamid.entry.a.${org}`, b: `wamid.entry.b.${org}`, c: `wamid.entry.c.${org}` };
    const change = (messages: unknown[]) => ({ field: "messages", value: { metadata: { phone_number_id: channel.providerPhoneNumberId }, messages } });
    const body = {
      object: "whatsapp_business_account",
      entry: [
        { id: 102290129340398, changes: [change([text(phone.slice(1), ids.a, "a"), { id: "wamid.nofrom", type: "text", text: { body: "x" } }])] },
        null,
        { id: "waba", changes: "not a list" },
        {
          id: "waba",
          changes: [
            { field: 7, value: {} },
            { field: "messages", value: { metadata: {}, messages: [text(phone.slice(1), "wamid.nometadata", "lost")] } },
            { field: "messages", value: { metadata: { phone_number_id: channel.providerPhoneNumberId }, messages: "not a list", statuses: [{ id: 5 }] } },
            change([text(phone.slice(1), ids.b, "b")]),
            { field: "message_template_status_update", value: { event: "APPROVED" } },
          ],
        },
        { id: ["waba"], changes: [change([text(phone.slice(1), ids.c, "c")])] },
      ],
    };
    // Called as the consumer does, with its own logger: a refused batch (dead-letter stream) would throw here.
    const lines: Array<Record<string, any>> = [];
    const log = createLogger("messaging-test", "warn", { write: (line: string) => void lines.push(JSON.parse(line)) });
    await processProviderBatch({ ...contextOf(h.svc.deps as MessagingDeps), log }, JSON.stringify(body));

    expect(await storedInbound(channel.id)).to.deep.equal([ids.a, ids.b, ids.c].sort());
    for (const id of Object.values(ids)) await received(id);
    const warnings = lines.filter((l) => l.level === "warn");
    expect(warnings, JSON.stringify(lines)).to.have.length(1);
    expect(warnings[0].skipped).to.deep.equal({ entries: 2, changes: 2, contacts: 0, messages: 2, statuses: 1 });
  });

  it("one malformed status does not drop the valid statuses beside it; redelivered, nothing is emitted twice", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    // No automatic callbacks for these sends: their statuses are driven by hand.
    h.sim.setWebhookUrl(undefined);
    const sent: Array<{ id: string; providerMessageId: string }> = [];
    try {
      for (const k of [1, 2]) {
        const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: `out ${k}` });
        expect(res.status).to.equal(200);
        sent.push(res.body);
      }
    } finally {
      h.sim.setWebhookUrl(h.webhookUrl);
    }
    const [one, two] = sent;
    const count = (type: string, id: string) => eventsOf(h, type, (d) => d.messageId === id).length;
    const body = messagesBatch(channel.providerPhoneNumberId, {
      statuses: [
        { status: "read", timestamp: seconds(), recipient_id: phone.slice(1), biz_opaque_callback_data: one.id },
        { id: one.providerMessageId, status: "delivered", timestamp: seconds(), recipient_id: phone.slice(1), biz_opaque_callback_data: one.id },
        { id: one.providerMessageId, status: 3, biz_opaque_callback_data: one.id },
        null,
        // Our id and the reason unreadable: the provider's id names the message, the reason is unknown.
        { id: two.providerMessageId, status: "failed", timestamp: null, recipient_id: 15550002222, biz_opaque_callback_data: 42, errors: "oops" },
      ],
    });
    expect(await h.sim.postRaw(body)).to.equal(200);
    await eventually(() => count("message.delivered", one.id) === 1 && count("message.failed", two.id) === 1, 10_000);
    const [failed] = eventsOf(h, "message.failed", (d) => d.messageId === two.id);
    expect(failed.data.error).to.deep.equal({ code: "unknown", title: "Message failed" });

    // The provider's retry (other bytes), then a later valid batch as a sentinel: once its `read` is out, the retry was handled.
    expect(await h.sim.postRaw(JSON.stringify(body, null, 1))).to.equal(200);
    const sentinel = messagesBatch(channel.providerPhoneNumberId, {
      statuses: [{ id: one.providerMessageId, status: "read", timestamp: seconds(), recipient_id: phone.slice(1), biz_opaque_callback_data: one.id }],
    });
    expect(await h.sim.postRaw(sentinel)).to.equal(200);
    await eventually(() => count("message.read", one.id) === 1, 10_000);
    expect(count("message.sent", one.id)).to.equal(1);
    expect(count("message.delivered", one.id)).to.equal(1);
    expect(count("message.failed", two.id)).to.equal(1);
    expect(count("message.read", two.id)).to.equal(0);
  });

  it("a timestamp in milliseconds is taken as the batch's receipt time in message.received", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const id = `wamid.ms.${org}`;
    const before = Date.now();
    expect(await h.sim.postRaw(messagesBatch(channel.providerPhoneNumberId, { messages: [text(phone.slice(1), id, "ms", String(Date.now()))] }))).to.equal(200);
    const event = await received(id);
    // The gateway stand-in stamps the batch when it receives it (before it reaches messaging).
    expect(event.data.receivedAt).to.match(/^\d{4}-\d\d-\d\dT/);
    expect(Date.parse(event.data.receivedAt)).to.be.within(before, Date.now());
  });

  it("a timestamp later than the batch's receipt (plus 5 minutes of skew), or none, is the receipt time, for receivedAt and the service window", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phones = { ms: uniquePhone(), future: uniquePhone(), skew: uniquePhone(), none: uniquePhone() };
    // A batch the gateway received 25 hours ago (it waited on the bus): the window its messages open is already closed.
    const receivedAt = new Date(Date.now() - 25 * 3600_000);
    const withinSkew = Math.floor(receivedAt.getTime() / 1000) + 120;
    const id = (k: string) => `wamid.ts.${k}.${org}`;
    const body = messagesBatch(channel.providerPhoneNumberId, {
      messages: [
        text(phones.ms.slice(1), id("ms"), "ms", 1795000000000),
        text(phones.future.slice(1), id("future"), "future", String(Math.floor(Date.now() / 1000) + 24 * 3600)),
        text(phones.skew.slice(1), id("skew"), "skew", String(withinSkew)),
        { from: phones.none.slice(1), id: id("none"), type: "text", text: { body: "none" } },
      ],
    });
    await h.bus.publish(providerBatchSubject(body), { body: JSON.stringify(body), receivedAt: receivedAt.toISOString() }, { msgId: `ts-${org}` });

    const at = async (k: string) => (await received(id(k))).data.receivedAt as string;
    expect(await at("ms")).to.equal(receivedAt.toISOString());
    expect(await at("future")).to.equal(receivedAt.toISOString());
    expect(await at("none")).to.equal(receivedAt.toISOString());
    // Up to 5 minutes past the receipt is clock skew: taken as it is.
    expect(await at("skew")).to.equal(new Date(withinSkew * 1000).toISOString());

    const { rows } = await db.query(`SELECT phone, last_inbound_at FROM messaging.service_windows WHERE channel_id = $1`, [channel.id]);
    const windows = new Map(rows.map((r) => [r.phone as string, new Date(r.last_inbound_at).toISOString()]));
    expect(windows.get(phones.ms)).to.equal(receivedAt.toISOString());
    expect(windows.get(phones.future)).to.equal(receivedAt.toISOString());
    for (const phone of [phones.ms, phones.future]) {
      const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "still open?" });
      expect(res.status, phone).to.equal(400);
      expect(res.body.error.code).to.equal("OUTSIDE_SERVICE_WINDOW");
    }
  });
});
