import { expect } from "chai";
import { DEFAULT_OPT_OUT_KEYWORDS, SUBJECTS, eventSubject } from "@platform/contracts";
import { newId } from "@platform/id";
import { eventually } from "@platform/testing";
import { api, checkOptOuts, harness, newOrg, newPhone, optOutEvents, registerChannel, optOutEventsSettled, resolveContact, sleep } from "./harness";

/** Publishes message.received as messaging does (a DomainEvent on the EVENTS stream). */
async function receive(org: string, channelId: string, phone: string, content: { text: string } | { button: { text: string; payload: string } }) {
  const contact = await resolveContact(org, phone);
  const id = newId("event");
  const messageId = newId("message");
  const data = {
    id,
    messageId,
    conversationId: newId("conversation"),
    contactId: contact.contactId,
    messagingChannelId: channelId,
    phone,
    type: "text" in content ? "text" : "button",
    ...content,
    providerMessageId: `wamid.${messageId}`,
    receivedAt: new Date().toISOString(),
  };
  const event = { event: "message.received", timestamp: new Date().toISOString(), organizationId: org, data };
  await harness().bus.publish(eventSubject("message.received"), event, { msgId: id });
  return { event, contactId: contact.contactId };
}

async function publishOrganization(org: string, optOutKeywords: string[], updatedAt = new Date()) {
  const payload = {
    id: org,
    name: "Acme",
    plan: "growth",
    rateLimit: { perSecond: 50, burst: 100 },
    optOutKeywords,
    createdAt: updatedAt.toISOString(),
    updatedAt: updatedAt.toISOString(),
    deleted: false,
  };
  await harness().bus.publish(SUBJECTS.organizationUpserted.subject, payload, { msgId: `${org}:${updatedAt.toISOString()}` });
}

/** Sends `negatives` first, then a positive control; once the control opted out, the others had their turn. */
async function expectNoOptOut(org: string, channelId: string, texts: Array<{ text: string } | { button: { text: string; payload: string } }>) {
  const phones = texts.map(() => newPhone());
  for (let i = 0; i < texts.length; i++) await receive(org, channelId, phones[i], texts[i]);
  const control = newPhone();
  await receive(org, channelId, control, { text: "STOP" });
  await eventually(async () => (await checkOptOuts(org, channelId, [control])).length === 1);
  await sleep(300);
  expect(await checkOptOuts(org, channelId, phones)).to.deep.equal([]);
}

describe("keyword opt-outs from inbound messages", () => {
  it("a text that is exactly a keyword opts the sender out of that channel, with source keyword", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const other = registerChannel(org, { isDefault: false });
    const phone = newPhone();
    const { contactId } = await receive(org, ch.id, phone, { text: "  stop " });
    await eventually(async () => (await checkOptOuts(org, ch.id, [phone])).length === 1);
    expect(await checkOptOuts(org, other.id, [phone])).to.deep.equal([]);
    const [event] = await eventually(() => optOutEvents(org).length === 1 && optOutEvents(org));
    expect(event.data).to.deep.include({ messagingChannelId: ch.id, phone, contactId, source: "keyword", keyword: "STOP", reason: null });
  });

  it("matches each default keyword in any case", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phones = DEFAULT_OPT_OUT_KEYWORDS.map(() => newPhone());
    for (let i = 0; i < phones.length; i++) {
      const k = DEFAULT_OPT_OUT_KEYWORDS[i];
      await receive(org, ch.id, phones[i], { text: i % 2 ? k.toLowerCase() : k });
    }
    await eventually(async () => (await checkOptOuts(org, ch.id, phones)).length === phones.length);
    const events = await eventually(() => optOutEvents(org).length === phones.length && optOutEvents(org));
    expect(events.map((e) => e.data.keyword).sort()).to.deep.equal([...DEFAULT_OPT_OUT_KEYWORDS].sort());
  });

  it("a sentence containing a keyword never matches", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await expectNoOptOut(org, ch.id, [{ text: "Please STOP sending me messages" }, { text: "stop it now" }, { text: "I want to unsubscribe" }, { text: "STOP!" }]);
  });

  it("a misspelled keyword never matches", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await expectNoOptOut(org, ch.id, [{ text: "STOPP" }, { text: "sotp" }, { text: "UNSUBSCRIBBE" }, { text: "OPT OUT" }]);
  });

  it("a button reply never matches, even with a keyword as its text or payload", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await expectNoOptOut(org, ch.id, [{ button: { text: "STOP", payload: "STOP" } }, { button: { text: "Unsubscribe", payload: "UNSUBSCRIBE" } }]);
  });

  it("a keyword on an already active opt-out emits nothing, and a redelivered message changes nothing", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const { event } = await receive(org, ch.id, phone, { text: "STOP" });
    await eventually(() => optOutEvents(org).length === 1);
    await receive(org, ch.id, phone, { text: "QUIT" });
    expect(await optOutEventsSettled(org)).to.have.length(1);

    // Cleared through the API, then the same inbound message arrives again (same event, new stream message).
    await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone }).expect(200);
    await harness().bus.publish(eventSubject("message.received"), event, { msgId: `${event.data.id}:again` });
    const control = newPhone();
    await receive(org, ch.id, control, { text: "STOP" });
    await eventually(async () => (await checkOptOuts(org, ch.id, [control])).length === 1);
    await sleep(300);
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([]);
  });

  it("uses the organization's own keyword list once it is known", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await publishOrganization(org, ["ALTO", "Baja"]);
    const first = newPhone();
    await eventually(async () => {
      // Keep trying until the organization copy arrived: "alto" only matches the custom list.
      await receive(org, ch.id, first, { text: "alto" });
      await sleep(200);
      return (await checkOptOuts(org, ch.id, [first])).length === 1;
    });
    const baja = newPhone();
    await receive(org, ch.id, baja, { text: "BAJA" });
    await eventually(async () => (await checkOptOuts(org, ch.id, [baja])).length === 1);
    const stop = newPhone();
    await receive(org, ch.id, stop, { text: "STOP" });
    await sleep(500);
    expect(await checkOptOuts(org, ch.id, [stop])).to.deep.equal([]);

    // An older copy of the organization never replaces the newer one.
    await publishOrganization(org, DEFAULT_OPT_OUT_KEYWORDS, new Date(Date.now() - 60_000));
    await sleep(300);
    const stillAlto = newPhone();
    await receive(org, ch.id, stillAlto, { text: "alto" });
    await eventually(async () => (await checkOptOuts(org, ch.id, [stillAlto])).length === 1);
  });
});
