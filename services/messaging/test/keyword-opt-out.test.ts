import { expect } from "chai";
import { eventually } from "@platform/testing";
import { api, createChannel, eventsOf, newOrg, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

/**
 * Inbound messages reach the contacts service with their batch's contacts
 * request, for keyword opt-outs (ADR 0014); the next send is refused. Needs the real contacts
 * service, which the harness boots when `@platform/contacts` is built.
 */
describe("keyword opt-outs through the contacts service", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  it("an inbound 'stop' opts the number out on that channel only; a button reply 'STOP' does not", async function () {
    this.timeout(20_000);
    expect(h.contacts.real, "the real contacts service is needed for keyword opt-outs").to.equal(true);
    const org = newOrg();
    const a = await createChannel(h, org);
    const b = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, b, phone, { text: "hello" });
    await receiveInbound(h, a, phone, { button: { text: "STOP", payload: "stop-promo" } });
    await new Promise((r) => setTimeout(r, 500));
    expect((await api(h, org).post("/api/v1/messages").send({ to: phone, text: "still fine", messagingChannelId: a.id })).status).to.equal(200);

    await receiveInbound(h, a, phone, { text: "  stop " });
    await eventually(() => eventsOf(h, "optout.created", (d) => d.phone === phone && d.messagingChannelId === a.id).length === 1, 10_000);
    const blocked = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "blocked", messagingChannelId: a.id });
    expect(blocked.status).to.equal(403);
    expect(blocked.body.error).to.deep.equal({ code: "CONTACT_OPTED_OUT", message: "Contact opted out" });
    const other = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "other channel", messagingChannelId: b.id });
    expect(other.status).to.equal(200);
  });

  it("a keyword's opt-out is in force before its message.received exists: a send on seeing the event is refused", async function () {
    this.timeout(20_000);
    const org = newOrg();
    const ch = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, ch, phone, { text: "STOP" });
    await eventually(() => eventsOf(h, "message.received", (d) => d.phone === phone).length === 1, 10_000);
    const blocked = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "too late", messagingChannelId: ch.id });
    expect(blocked.status).to.equal(403);
    expect(blocked.body.error.code).to.equal("CONTACT_OPTED_OUT");
  });
});
