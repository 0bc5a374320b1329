import { expect } from "chai";
import { api, newOrg, newPhone, registerChannel } from "./harness";

/** GET /admin/v1/organizations/{orgId}/opt-outs?phone=: the console's look-up by phone (issue 15). */
describe("opt-outs: look-up by phone", () => {
  const lookUp = (org: string, phone: string) => api(org).get(`/admin/v1/organizations/${org}/opt-outs?phone=${encodeURIComponent(phone)}`);

  it("answers the phone's record on every channel, active first, with source and reason; the phone normalized", async () => {
    const org = newOrg();
    const ch1 = registerChannel(org);
    const ch2 = registerChannel(org);
    const phone = newPhone();
    expect((await api(org).post(`/admin/v1/organizations/${org}/opt-outs`, { messagingChannelId: ch1.id, phone, reason: "called us" })).status).to.equal(200);
    expect((await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch2.id, phone })).status).to.equal(200);
    expect((await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: ch2.id, phone })).status).to.equal(200);

    const res = await lookUp(org, phone.replace("+", ""));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.phone).to.equal(phone);
    expect(res.body.items).to.have.length(2);
    const [first, second] = res.body.items;
    expect(first).to.include({ messagingChannelId: ch1.id, phone, active: true, source: "manual", reason: "called us", revokedAt: null, keyword: null });
    expect(first.optOutId).to.match(/^opt_/);
    expect(second).to.include({ messagingChannelId: ch2.id, active: false, source: "api" });
    expect(Date.parse(second.revokedAt)).to.be.a("number").and.not.NaN;
  });

  it("answers an empty list for a number that never opted out", async () => {
    const org = newOrg();
    const phone = newPhone();
    const res = await lookUp(org, phone);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ phone, items: [] });
  });

  it("never shows another organization's opt-out", async () => {
    const a = newOrg();
    const b = newOrg();
    const ch = registerChannel(a);
    const phone = newPhone();
    expect((await api(a).post(`/admin/v1/organizations/${a}/opt-outs`, { messagingChannelId: ch.id, phone })).status).to.equal(200);
    const theirs = await lookUp(b, phone);
    expect(theirs.status).to.equal(200);
    expect(theirs.body.items).to.deep.equal([]);
    expect((await lookUp(a, phone)).body.items).to.have.length(1);
  });

  it("refuses a missing or invalid phone with 400 VALIDATION_ERROR on query.phone", async () => {
    const org = newOrg();
    for (const query of ["", "?phone=abc", "?phone=12"]) {
      const res = await api(org).get(`/admin/v1/organizations/${org}/opt-outs${query}`);
      expect(res.status, query).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details[0].path).to.match(/phone/);
    }
  });
});
