import { expect } from "chai";
import { api, checkOptOuts, newOrg, newPhone, registerChannel, optOutEventsSettled, resolveContact } from "./harness";

describe("tenant isolation", () => {
  it("another organization sees none of the contacts and gets 404 for the channels", async () => {
    const owner = newOrg();
    const intruder = newOrg();
    const ch = registerChannel(owner);
    const phone = newPhone();
    await resolveContact(owner, phone, { name: "Ana" });
    await api(owner).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone }).expect(200);

    const list = await api(intruder).get("/api/v1/contacts?limit=100");
    expect(list.status).to.equal(200);
    expect(list.body).to.deep.equal({ items: [] });

    for (const action of ["set", "clear"]) {
      const res = await api(intruder).post("/api/v1/opt-outs", { action, messagingChannelId: ch.id, phone });
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    }
    const manual = await api(intruder).post(`/admin/v1/organizations/${intruder}/opt-outs`, { messagingChannelId: ch.id, phone });
    expect(manual.status).to.equal(404);
    expect(manual.body.error.code).to.equal("CHANNEL_NOT_FOUND");

    // The owner's opt-out is untouched by the intruder's attempts.
    expect(await checkOptOuts(owner, ch.id, [phone])).to.deep.equal([phone]);
    // The intruder's check never sees the owner's opt-outs, even naming the owner's channel.
    expect(await checkOptOuts(intruder, ch.id, [phone])).to.deep.equal([]);
    expect(await optOutEventsSettled(intruder)).to.deep.equal([]);
  });

  it("the same phone is a different contact in each organization", async () => {
    const a = newOrg();
    const b = newOrg();
    const phone = newPhone();
    const ca = await resolveContact(a, phone);
    const cb = await resolveContact(b, phone);
    expect(ca.contactId).to.not.equal(cb.contactId);
    expect(cb.created).to.equal(true);
    const chA = registerChannel(a);
    await api(a).post("/api/v1/opt-outs", { action: "set", messagingChannelId: chA.id, phone }).expect(200);
    const listB = await api(b).get("/api/v1/contacts");
    expect(listB.body.items).to.have.length(1);
    expect(listB.body.items[0]).to.deep.include({ id: cb.contactId, isOptedOut: false, optedOutChannelIds: [] });
  });

  it("a channel copied locally for one organization is still 404 for another", async () => {
    const owner = newOrg();
    const ch = registerChannel(owner);
    // First use by the owner stores the channel locally.
    await api(owner).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: newPhone() }).expect(200);
    const res = await api(newOrg()).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: newPhone() });
    expect(res.status).to.equal(404);
    expect(res.body.error.code).to.equal("CHANNEL_NOT_FOUND");
  });
});
