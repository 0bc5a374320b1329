import { expect } from "chai";
import { CONTACTS_RPC, DEFAULT_OPT_OUT_KEYWORDS, SUBJECTS } from "@platform/contracts";
import { newId } from "@platform/id";
import { eventually } from "@platform/testing";
import { api, checkOptOuts, harness, newOrg, newPhone, optOutEvents, registerChannel, optOutEventsSettled } from "./harness";

type Content = { text: string } | { button: { text: string; payload: string } };

/**
 * An inbound batch's contacts request as messaging makes it (ADR 0014): the senders' phones and the batch's
 * messages for keyword matching, keyed by the provider's message id. Answers once the opt-outs are applied.
 */
async function receive(org: string, channelId: string, messages: Array<{ phone: string; content: Content; key?: string }>) {
  const inbound = messages.map(({ phone, content, key }) => ({
    key: key ?? `wamid.${newId("message")}`,
    messagingChannelId: channelId,
    phone,
    type: "text" in content ? "text" : "button",
    text: "text" in content ? content.text : content.button.text,
  }));
  const phones = [...new Set(messages.map((m) => m.phone))];
  const answer = await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: org, phones, inbound }, { timeoutMs: 10_000 });
  return { contactIds: new Map(phones.map((p, i) => [p, answer.contactIds[i]])), keys: inbound.map((m) => m.key) };
}
const receiveOne = async (org: string, channelId: string, phone: string, content: Content, key?: string) =>
  receive(org, channelId, [{ phone, content, key }]);

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

/** None of `contents` opts its sender out: checked as soon as the request answered (the opt-outs are applied by then). */
async function expectNoOptOut(org: string, channelId: string, contents: Content[]) {
  const phones = contents.map(() => newPhone());
  await receive(org, channelId, contents.map((content, i) => ({ phone: phones[i], content })));
  expect(await checkOptOuts(org, channelId, phones)).to.deep.equal([]);
  expect(await optOutEventsSettled(org)).to.deep.equal([]);
}

describe("keyword opt-outs of inbound batches (the contacts request, ADR 0014)", () => {
  it("a text that is exactly a keyword opts the sender out of that channel before the request answers, with source keyword", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const other = registerChannel(org, { isDefault: false });
    const phone = newPhone();
    const { contactIds } = await receiveOne(org, ch.id, phone, { text: "  stop " });
    // Read-your-writes: applied when the answer came, before messaging stores the message.
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([phone]);
    expect(await checkOptOuts(org, other.id, [phone])).to.deep.equal([]);
    const [event] = await eventually(() => optOutEvents(org).length === 1 && optOutEvents(org));
    expect(event.data).to.deep.include({ messagingChannelId: ch.id, phone, contactId: contactIds.get(phone), source: "keyword", keyword: "STOP", reason: null });
  });

  it("matches each default keyword in any case, many in one batch", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phones = DEFAULT_OPT_OUT_KEYWORDS.map(() => newPhone());
    await receive(org, ch.id, phones.map((phone, i) => ({ phone, content: { text: i % 2 ? DEFAULT_OPT_OUT_KEYWORDS[i].toLowerCase() : DEFAULT_OPT_OUT_KEYWORDS[i] } })));
    expect((await checkOptOuts(org, ch.id, phones)).sort()).to.deep.equal([...phones].sort());
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

  it("a button reply never matches, even with a keyword as its text", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await expectNoOptOut(org, ch.id, [{ button: { text: "STOP", payload: "STOP" } }, { button: { text: "Unsubscribe", payload: "UNSUBSCRIBE" } }]);
  });

  it("a keyword on an already active opt-out emits nothing, and a redelivered message changes nothing, even after a clear", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const { keys } = await receiveOne(org, ch.id, phone, { text: "STOP" });
    await receiveOne(org, ch.id, phone, { text: "QUIT" });
    const ofPhone = async () => (await optOutEventsSettled(org)).filter((e) => e.data.phone === phone);
    expect(await ofPhone()).to.have.length(1);

    // Cleared through the API, then the same inbound message comes again (a provider retry, a redelivered batch).
    await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone }).expect(200);
    await receiveOne(org, ch.id, phone, { text: "STOP" }, keys[0]);
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([]);
    expect(await ofPhone()).to.have.length(1);
  });

  it("the same message in two concurrent requests opts out once", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const key = `wamid.${newId("message")}`;
    await Promise.all([receiveOne(org, ch.id, phone, { text: "STOP" }, key), receiveOne(org, ch.id, phone, { text: "STOP" }, key)]);
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([phone]);
    expect(await optOutEventsSettled(org)).to.have.length(1);
  });

  it("a request without inbound messages (template jobs, first sends) opts nobody out", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: org, phones: [phone] });
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([]);
  });

  it("uses the organization's own keyword list once it is known", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await publishOrganization(org, ["ALTO", "Baja"]);
    const first = newPhone();
    await eventually(async () => {
      // Keep trying until the organization copy arrived: "alto" only matches the custom list.
      await receiveOne(org, ch.id, first, { text: "alto" });
      return (await checkOptOuts(org, ch.id, [first])).length === 1;
    });
    const baja = newPhone();
    await receiveOne(org, ch.id, baja, { text: "BAJA" });
    expect(await checkOptOuts(org, ch.id, [baja])).to.deep.equal([baja]);
    const stop = newPhone();
    await receiveOne(org, ch.id, stop, { text: "STOP" });
    expect(await checkOptOuts(org, ch.id, [stop])).to.deep.equal([]);

    // An older copy of the organization never replaces the newer one. Marker: a newer copy published after it adds
    // "CIMA"; once that matches, the older copy has had its turn, and the defaults ("STOP") must still not match.
    await publishOrganization(org, DEFAULT_OPT_OUT_KEYWORDS, new Date(Date.now() - 60_000));
    await publishOrganization(org, ["ALTO", "Baja", "CIMA"], new Date(Date.now() + 1_000));
    await eventually(async () => {
      const marker = newPhone();
      await receiveOne(org, ch.id, marker, { text: "cima" });
      return (await checkOptOuts(org, ch.id, [marker])).length === 1;
    });
    const stopAgain = newPhone();
    await receiveOne(org, ch.id, stopAgain, { text: "STOP" });
    expect(await checkOptOuts(org, ch.id, [stopAgain])).to.deep.equal([]);
    const stillAlto = newPhone();
    await receiveOne(org, ch.id, stillAlto, { text: "alto" });
    expect(await checkOptOuts(org, ch.id, [stillAlto])).to.deep.equal([stillAlto]);
  });
});
