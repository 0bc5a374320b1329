import { expect } from "chai";
import { eventually } from "@platform/testing";
import { api, checkOptOuts, harness, newOrg, newPhone, optOutEvents, registerChannel, optOutEventsSettled, resolveContact } from "./harness";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe("opt-outs: set and clear (happy paths)", () => {
  it("set creates an active opt-out and emits optout.created with source api", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const contact = await resolveContact(org, phone);

    const res = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone, reason: "asked by phone" });
    expect(res.status).to.equal(200);
    expect(res.body.active).to.equal(true);
    expect(res.body.optOutId).to.match(/^opt_/);
    expect(res.body.revokedAt).to.equal(null);

    const [event] = await eventually(() => optOutEvents(org).length === 1 && optOutEvents(org));
    expect(event.data).to.deep.include({
      optOutId: res.body.optOutId,
      messagingChannelId: ch.id,
      phone,
      contactId: contact.contactId,
      source: "api",
      reason: "asked by phone",
    });
    expect(event.data).to.not.have.property("keyword");
    expect(event.data.id).to.match(/^evt_/);
  });

  it("set normalizes the phone and keeps contactId null when there is no contact", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const res = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: "+1 (415) 555-0100" });
    expect(res.status).to.equal(200);
    const [event] = await eventually(() => optOutEvents(org).length === 1 && optOutEvents(org));
    expect(event.data.phone).to.equal("+14155550100");
    expect(event.data.contactId).to.equal(null);
    expect(event.data.reason).to.equal(null);
    expect(await checkOptOuts(org, ch.id, ["+14155550100"])).to.deep.equal(["+14155550100"]);
  });

  it("a second set on an active opt-out keeps the record and emits nothing", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const first = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone });
    const second = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone, reason: "again" });
    expect(second.status).to.equal(200);
    expect(second.body).to.deep.equal(first.body);
    await eventually(() => optOutEvents(org).length === 1);
    expect(await optOutEventsSettled(org)).to.have.length(1);
  });

  it("clear revokes, set reactivates the same record (same optOutId) and emits again", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const set1 = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone, reason: "first" });
    const clear = await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone });
    expect(clear.status).to.equal(200);
    expect(clear.body.active).to.equal(false);
    expect(clear.body.optOutId).to.equal(set1.body.optOutId);
    expect(clear.body.revokedAt).to.match(ISO_MS);
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([]);

    const clearAgain = await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone });
    expect(clearAgain.status).to.equal(200);
    expect(clearAgain.body).to.deep.equal(clear.body);

    const set2 = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone, reason: "second" });
    expect(set2.body).to.deep.equal({ active: true, optOutId: set1.body.optOutId, revokedAt: null });
    const events = await eventually(() => optOutEvents(org).length === 2 && optOutEvents(org));
    expect(events.map((e) => e.data.reason).sort()).to.deep.equal(["first", "second"]);
    expect(events.every((e) => e.data.optOutId === set1.body.optOutId)).to.equal(true);
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([phone]);
  });

  it("clear on a number never opted out answers active false, optOutId null, revokedAt null", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const res = await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone: newPhone() });
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ active: false, optOutId: null, revokedAt: null });
  });

  it("keeps a reason of 500 characters", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const reason = "r".repeat(500);
    const res = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: newPhone(), reason });
    expect(res.status).to.equal(200);
    const [event] = await eventually(() => optOutEvents(org).length === 1 && optOutEvents(org));
    expect(event.data.reason).to.equal(reason);
  });

  it("is per channel: an opt-out on channel A never blocks channel B", async () => {
    const org = newOrg();
    const a = registerChannel(org, { name: "A" });
    const b = registerChannel(org, { name: "B", isDefault: false });
    const phone = newPhone();
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: a.id, phone }).expect(200);
    expect(await checkOptOuts(org, a.id, [phone])).to.deep.equal([phone]);
    expect(await checkOptOuts(org, b.id, [phone])).to.deep.equal([]);
    const clearB = await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: b.id, phone });
    expect(clearB.body).to.deep.equal({ active: false, optOutId: null, revokedAt: null });
    expect(await checkOptOuts(org, a.id, [phone])).to.deep.equal([phone]);
  });

  it("is read-your-writes: the check sees a set as soon as it answered, and a clear too", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    for (let i = 0; i < 10; i++) {
      const phone = newPhone();
      await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone }).expect(200);
      expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([phone]);
      await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone }).expect(200);
      expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal([]);
    }
  });

  it("concurrent sets on a fresh pair make one record and exactly one optout.created", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone })),
    );
    expect(answers.every((r) => r.status === 200 && r.body.active === true)).to.equal(true);
    expect(new Set(answers.map((r) => r.body.optOutId)).size).to.equal(1);
    await eventually(() => optOutEvents(org).length >= 1);
    expect(await optOutEventsSettled(org)).to.have.length(1);
  });

  it("concurrent set/clear on one pair leave one consistent record", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        api(org).post("/api/v1/opt-outs", { action: i % 2 === 0 ? "set" : "clear", messagingChannelId: ch.id, phone }),
      ),
    );
    expect(answers.every((r) => r.status === 200)).to.equal(true);
    expect(new Set(answers.map((r) => r.body.optOutId).filter((id) => id !== null)).size).to.equal(1);

    const rows = await harness().svc.deps.db.query(`SELECT id, active, revoked_at FROM contacts.opt_outs WHERE organization_id = $1`, [org]);
    expect(rows).to.have.length(1);
    expect(rows[0].active).to.equal(rows[0].revoked_at === null);
    expect(await checkOptOuts(org, ch.id, [phone])).to.deep.equal(rows[0].active ? [phone] : []);
    // Every event settled (a marker seen after them): one per transition into active, at most one per set.
    const events = await optOutEventsSettled(org);
    expect(events.length).to.be.within(1, 12);
    expect(new Set(events.map((e) => e.data.id)).size).to.equal(events.length);
  });

  it("bursts of concurrent sets then clears: exactly one optout.created per transition into active", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const rounds = 4;
    for (let round = 0; round < rounds; round++) {
      const sets = await Promise.all(
        Array.from({ length: 6 }, () => api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone })),
      );
      expect(sets.every((r) => r.status === 200 && r.body.active)).to.equal(true);
      const clears = await Promise.all(
        Array.from({ length: 6 }, () => api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch.id, phone })),
      );
      expect(clears.every((r) => r.status === 200 && !r.body.active)).to.equal(true);
      // Every clear of the burst answers the one revocation that happened.
      expect(new Set(clears.map((r) => r.body.revokedAt)).size).to.equal(1);
    }
    await eventually(() => optOutEvents(org).length >= rounds);
    expect(await optOutEventsSettled(org)).to.have.length(rounds);
  });

  it("admin manual addition: 200 with the state and optout.created with source manual", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    const res = await api(org).post(`/admin/v1/organizations/${org}/opt-outs`, { messagingChannelId: ch.id, phone, reason: "called support" });
    expect(res.status).to.equal(200);
    expect(res.body.active).to.equal(true);
    expect(res.body.revokedAt).to.equal(null);
    const [event] = await eventually(() => optOutEvents(org).length === 1 && optOutEvents(org));
    expect(event.data).to.deep.include({ source: "manual", reason: "called support", phone, optOutId: res.body.optOutId });

    const again = await api(org).post(`/admin/v1/organizations/${org}/opt-outs`, { messagingChannelId: ch.id, phone });
    expect(again.body).to.deep.equal(res.body);
    expect(await optOutEventsSettled(org)).to.have.length(1);
  });
});
