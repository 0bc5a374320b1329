import { expect } from "chai";
import { eventually } from "@platform/testing";
import { signBody } from "@platform/provider-simulator";
import { api, APP_SECRET, createChannel, eventsOf, messagesBatch, newOrg, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("provider inbound messages", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  it("stores a text message, resolves the contact with waId and name, opens a conversation, emits message.received", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const ts = Math.floor(Date.now() / 1000) - 60;
    const wamid = await receiveInbound(h, channel, phone.slice(1), { text: "Hi there", name: "Ana", timestamp: ts });
    const contact = (await h.contacts.contactOf(org, phone))!;
    expect(contact).to.include({ name: "Ana", waId: phone.slice(1) });

    const [received] = eventsOf(h, "message.received", (d) => d.providerMessageId === wamid);
    expect(received.organizationId).to.equal(org);
    expect(received.data).to.include({
      contactId: contact.id,
      messagingChannelId: channel.id,
      phone,
      type: "text",
      text: "Hi there",
      providerMessageId: wamid,
      receivedAt: new Date(ts * 1000).toISOString(),
    });
    expect(received.data.messageId).to.match(/^msg_/);
    expect(received.data.button).to.equal(undefined);
    const opened = await eventually(() => eventsOf(h, "conversation.opened", (d) => d.conversationId === received.data.conversationId)[0]);
    expect(opened.data).to.include({ contactId: contact.id, messagingChannelId: channel.id, phone });

    const list = await api(h, org).get("/api/v1/conversations");
    expect(list.body.items).to.have.length(1);
    expect(list.body.items[0]).to.include({ id: received.data.conversationId, status: "open", phone, messagingChannelId: channel.id });
  });

  it("marks button replies as such (type button, button {text, payload}, no text)", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const wamid = await receiveInbound(h, channel, phone, { button: { text: "STOP", payload: "unsubscribe-me" } });
    const [received] = eventsOf(h, "message.received", (d) => d.providerMessageId === wamid);
    expect(received.data.type).to.equal("button");
    expect(received.data.button).to.deep.equal({ text: "STOP", payload: "unsubscribe-me" });
    expect(received.data.text).to.equal(undefined);
  });

  it("an interactive message's reply button is a button reply too (type interactive, button {text: its title, payload: its id}), never a keyword", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const wamid = `wamid.interactive.${Date.now()}`;
    const body = messagesBatch(channel.providerPhoneNumberId, {
      messages: [
        { from: phone.slice(1), id: wamid, timestamp: String(Math.floor(Date.now() / 1000)), type: "interactive", interactive: { type: "button_reply", button_reply: { id: "opt-1", title: "STOP" } } },
      ],
    });
    expect(await h.sim.postRaw(body)).to.equal(200);
    const [received] = await eventually(() => {
      const list = eventsOf(h, "message.received", (d) => d.providerMessageId === wamid);
      return list.length ? list : undefined;
    });
    expect(received.data.type).to.equal("interactive");
    expect(received.data.button).to.deep.equal({ text: "STOP", payload: "opt-1" });
    expect(received.data.text).to.equal(undefined);
    const send = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "still allowed", messagingChannelId: channel.id });
    expect(send.status).to.equal(200);
  });

  it("carries what a media, location, list-reply or reaction message says in message.received; an unreadable part is left out, the message still received", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const ts = String(Math.floor(Date.now() / 1000));
    const id = (k: string) => `wamid.extras.${k}.${Date.now()}`;
    const ids = { image: id("image"), doc: id("doc"), location: id("location"), list: id("list"), reaction: id("reaction"), bad: id("bad") };
    const from = phone.slice(1);
    const body = messagesBatch(channel.providerPhoneNumberId, {
      messages: [
        { from, id: ids.image, timestamp: ts, type: "image", image: { id: "media-1", mime_type: "image/jpeg", sha256: "abc", caption: "STOP" } },
        { from, id: ids.doc, timestamp: ts, type: "document", document: { id: "media-2", mime_type: "application/pdf", filename: "a.pdf" } },
        { from, id: ids.location, timestamp: ts, type: "location", location: { latitude: 52.52, longitude: "13.405", name: "Office", address: "Main St 1" } },
        { from, id: ids.list, timestamp: ts, type: "interactive", interactive: { type: "list_reply", list_reply: { id: "row-2", title: "Tuesday", description: "10:00" } } },
        { from, id: ids.reaction, timestamp: ts, type: "reaction", reaction: { message_id: "wamid.OUT1", emoji: "👍" } },
        { from, id: ids.bad, timestamp: ts, type: "video", video: { mime_type: "video/mp4" } },
      ],
    });
    expect(await h.sim.postRaw(body)).to.equal(200);
    const of = (wamid: string) => eventsOf(h, "message.received", (d) => d.providerMessageId === wamid)[0]?.data;
    await eventually(() => Object.values(ids).every((w) => of(w)));
    expect(of(ids.image)).to.deep.include({ type: "image", media: { id: "media-1", mimeType: "image/jpeg", sha256: "abc", caption: "STOP" } });
    expect(of(ids.image).text).to.equal(undefined);
    expect(of(ids.doc).media).to.deep.equal({ id: "media-2", mimeType: "application/pdf", fileName: "a.pdf" });
    expect(of(ids.location).location).to.deep.equal({ latitude: 52.52, longitude: 13.405, name: "Office", address: "Main St 1" });
    expect(of(ids.list)).to.deep.include({ type: "interactive", listReply: { id: "row-2", title: "Tuesday", description: "10:00" } });
    expect(of(ids.list).button).to.equal(undefined);
    expect(of(ids.reaction).reaction).to.deep.equal({ providerMessageId: "wamid.OUT1", emoji: "👍" });
    expect(of(ids.bad)).to.include({ type: "video" });
    expect(of(ids.bad).media).to.equal(undefined);
    // A caption is not a keyword: the number is not opted out.
    const send = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "still allowed", messagingChannelId: channel.id });
    expect(send.status).to.equal(200);
  });

  it("stores a message whose text and name carry NUL (which Postgres refuses) with U+FFFD in its place", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const wamid = await receiveInbound(h, channel, phone.slice(1), { text: "a\u0000b", name: "N\u0000" });
    const [received] = eventsOf(h, "message.received", (d) => d.providerMessageId === wamid);
    expect(received.data.text).to.equal("a\uFFFDb");
    expect((await h.contacts.contactOf(org, phone))!.name).to.equal("N\uFFFD");
  });

  it("a duplicated provider batch stores one message and emits once; a second message reuses the conversation", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const body = messagesBatch(channel.providerPhoneNumberId, {
      contacts: [{ profile: { name: "Dup" }, wa_id: phone.slice(1) }],
      messages: [
        { from: phone.slice(1), id: `wamid.dup1.${Date.now()}`, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "one" } },
        { from: phone.slice(1), id: `wamid.dup2.${Date.now()}`, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "two" } },
      ],
    });
    expect(await h.sim.postRaw(body)).to.equal(200);
    // The same batch again with different bytes (a provider retry is not always byte-identical), so the bus dedupe does not hide it.
    expect(await h.sim.postRaw(JSON.stringify(body, null, 1))).to.equal(200);
    await eventually(() => eventsOf(h, "message.received", (d) => d.phone === phone).length >= 2);
    await new Promise((r) => setTimeout(r, 700));
    const received = eventsOf(h, "message.received", (d) => d.phone === phone);
    expect(received.map((e) => e.data.text).sort()).to.deep.equal(["one", "two"]);
    expect(new Set(received.map((e) => e.data.conversationId)).size).to.equal(1);
    expect(eventsOf(h, "conversation.opened", (d) => d.phone === phone)).to.have.length(1);
  });

  it("stores the good messages of a batch that also holds ones it cannot store as sent: a timestamp past any date (now instead), an over-long id (skipped)", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const stamp = Date.now();
    const message = (id: string, text: string, timestamp: string | number) => ({ from: phone.slice(1), id, timestamp, type: "text", text: { body: text } });
    const status = await h.sim.postRaw(
      messagesBatch(channel.providerPhoneNumberId, {
        messages: [
          message(`wamid.good.${stamp}`, "good", String(Math.floor(stamp / 1000))),
          message(`wamid.future.${stamp}`, "far future", "99999999999999"),
          message(`wamid.long.${stamp}.${"x".repeat(8_000)}`, "long id", String(Math.floor(stamp / 1000))),
          message(`wamid.e13.${stamp}`, "1e13", 1e13),
        ],
      }),
    );
    expect(status).to.equal(200);
    // Before, "Invalid time value" (and contacts refusing the long key) failed the whole batch on every redelivery.
    const received = await eventually(() => {
      const all = eventsOf(h, "message.received", (d) => d.phone === phone);
      return all.length >= 3 ? all : undefined;
    }, 10_000);
    expect(received.map((e) => e.data.text).sort()).to.deep.equal(["1e13", "far future", "good"]);
    for (const e of received) expect(Date.parse(e.data.receivedAt), e.data.text).to.be.within(stamp - 60_000, Date.now() + 60_000);
    // The skipped one would have been written in the same transaction as these: nothing more can come.
    expect(eventsOf(h, "message.received", (d) => d.phone === phone)).to.have.length(3);
  });

  it("ignores unknown phone number ids and template status changes", async () => {
    const phone = uniquePhone();
    const status = await h.sim.postRaw({
      object: "whatsapp_business_account",
      entry: [
        {
          id: "waba",
          changes: [
            { field: "message_template_status_update", value: { event: "APPROVED", message_template_id: 1, message_template_name: "x", message_template_language: "en" } },
            {
              field: "messages",
              value: {
                metadata: { phone_number_id: "pn-unknown-to-us" },
                messages: [{ from: phone.slice(1), id: `wamid.unknown.${Date.now()}`, timestamp: "1700000000", type: "text", text: { body: "x" } }],
              },
            },
          ],
        },
      ],
    });
    expect(status).to.equal(200);
    await new Promise((r) => setTimeout(r, 500));
    expect(eventsOf(h, "message.received", (d) => d.phone === phone)).to.have.length(0);
  });

  it("the gateway stand-in refuses a bad signature (nothing stored)", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const raw = JSON.stringify({
      object: "whatsapp_business_account",
      entry: [{ id: "w", changes: [{ field: "messages", value: { metadata: { phone_number_id: channel.providerPhoneNumberId }, messages: [{ from: phone.slice(1), id: `wamid.bad.${Date.now()}`, timestamp: "1700000000", type: "text", text: { body: "x" } }] } }] }],
    });
    expect(await h.sim.postRaw(raw, { signature: signBody(raw, "wrong-secret") })).to.equal(401);
    await new Promise((r) => setTimeout(r, 300));
    expect(eventsOf(h, "message.received", (d) => d.phone === phone)).to.have.length(0);
    expect(APP_SECRET).to.be.a("string");
  });
});

describe("provider statuses", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  async function sendOne(org: string) {
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "status" });
    expect(res.status).to.equal(200);
    await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === res.body.id).length === 1);
    return { channel, phone, message: res.body as { id: string; providerMessageId: string } };
  }

  const count = (type: string, id: string) => eventsOf(h, type, (d) => d.messageId === id).length;

  it("moves forward only: read before delivered is final; late delivered and repeats emit nothing", async () => {
    const org = newOrg();
    const { channel, phone, message } = await sendOne(org);
    // Let the simulator's automatic statuses finish first.
    await eventually(() => count("message.read", message.id) === 1);
    await h.sim.idle();
    const base = { phoneNumberId: channel.providerPhoneNumberId, providerMessageId: message.providerMessageId, recipientId: phone };
    await h.sim.injectStatus({ ...base, status: "delivered" });
    await h.sim.injectStatus({ ...base, status: "read" });
    await h.sim.injectStatus({ ...base, status: "sent" });
    await h.sim.injectStatus({ ...base, status: "failed" });
    await new Promise((r) => setTimeout(r, 600));
    expect(count("message.sent", message.id)).to.equal(1);
    expect(count("message.delivered", message.id)).to.equal(1);
    expect(count("message.read", message.id)).to.equal(1);
    expect(count("message.failed", message.id)).to.equal(0);
  });

  it("out of order in one batch: read first implies delivered (delivered then read, once each), the late delivered adds nothing", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    // No automatic callbacks for this send: the statuses are driven by hand.
    h.sim.setWebhookUrl(undefined);
    let res;
    try {
      res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "manual statuses" });
    } finally {
      h.sim.setWebhookUrl(h.webhookUrl);
    }
    const id: string = res.body.id;
    const pmid: string = res.body.providerMessageId;
    const raw = {
      object: "whatsapp_business_account",
      entry: [
        {
          id: "w",
          changes: [
            {
              field: "messages",
              value: {
                metadata: { phone_number_id: channel.providerPhoneNumberId },
                statuses: [
                  { id: pmid, status: "read", timestamp: "1700000003", recipient_id: phone.slice(1), biz_opaque_callback_data: id },
                  { id: pmid, status: "delivered", timestamp: "1700000002", recipient_id: phone.slice(1), biz_opaque_callback_data: id },
                  { id: pmid, status: "read", timestamp: "1700000003", recipient_id: phone.slice(1) },
                ],
              },
            },
          ],
        },
      ],
    };
    expect(await h.sim.postRaw(raw)).to.equal(200);
    await eventually(() => count("message.read", id) === 1);
    await new Promise((r) => setTimeout(r, 400));
    expect(count("message.sent", id)).to.equal(1);
    expect(count("message.delivered", id)).to.equal(1);
    expect(count("message.read", id)).to.equal(1);
    // In that order on the bus (one transaction's outbox, in order).
    const order = h.events.received.filter((e) => e.data?.data?.messageId === id).map((e) => e.data.event);
    expect(order).to.deep.equal(["message.sent", "message.delivered", "message.read"]);
  });

  it("failed from sent carries the provider's error; later statuses change nothing", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.failNumber(phone);
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "will fail" });
    expect(res.status).to.equal(200);
    const failed = await eventually(() => eventsOf(h, "message.failed", (d) => d.messageId === res.body.id)[0]);
    expect(failed.data.error).to.deep.equal({ code: "131026", title: "Message undeliverable" });
    expect(failed.data.status).to.equal("failed");
    await h.sim.injectStatus({ phoneNumberId: channel.providerPhoneNumberId, providerMessageId: res.body.providerMessageId, recipientId: phone, status: "read" });
    await new Promise((r) => setTimeout(r, 400));
    expect(count("message.read", res.body.id)).to.equal(0);
    expect(count("message.failed", res.body.id)).to.equal(1);
  });
});
