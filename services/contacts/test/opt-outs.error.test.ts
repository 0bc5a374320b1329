import { expect } from "chai";
import { eventually } from "@platform/testing";
import { api, harness, newOrg, newPhone, publishChannel, registerChannel } from "./harness";
import request from "supertest";

describe("opt-outs: invalid input and unknown channels", () => {
  const cases: Array<[string, unknown, string]> = [
    ["missing action", { messagingChannelId: "ch_x", phone: "+14155550100" }, "action"],
    ["unknown action", { action: "toggle", messagingChannelId: "ch_x", phone: "+14155550100" }, "action"],
    ["missing channel", { action: "set", phone: "+14155550100" }, "messagingChannelId"],
    ["missing phone", { action: "set", messagingChannelId: "ch_x" }, "phone"],
    ["phone too short", { action: "set", messagingChannelId: "ch_x", phone: "12" }, "phone"],
    ["phone too long", { action: "set", messagingChannelId: "ch_x", phone: "1".repeat(33) }, "phone"],
    ["phone not a number", { action: "set", messagingChannelId: "ch_x", phone: "call me maybe" }, "phone"],
    ["phone of a wrong type", { action: "set", messagingChannelId: "ch_x", phone: 14155550100 }, "phone"],
    ["reason over 500", { action: "set", messagingChannelId: "ch_x", phone: "+14155550100", reason: "x".repeat(501) }, "reason"],
    ["reason of a wrong type", { action: "set", messagingChannelId: "ch_x", phone: "+14155550100", reason: 5 }, "reason"],
  ];
  for (const [name, body, path] of cases) {
    it(`400 VALIDATION_ERROR: ${name}`, async () => {
      const res = await api(newOrg()).post("/api/v1/opt-outs", body);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
    });
  }

  it("400 on a body that is not an object, INVALID_JSON on broken JSON", async () => {
    const org = newOrg();
    const arr = await api(org).post("/api/v1/opt-outs", [1, 2]);
    expect(arr.status).to.equal(400);
    expect(arr.body.error.code).to.equal("VALIDATION_ERROR");
    const broken = await api(org).post("/api/v1/opt-outs").set("content-type", "application/json").send('{"action":');
    expect(broken.status).to.equal(400);
    expect(broken.body.error.code).to.equal("INVALID_JSON");
  });

  it("404 CHANNEL_NOT_FOUND for an unknown channel, on set and on clear", async () => {
    const org = newOrg();
    for (const action of ["set", "clear"]) {
      const res = await api(org).post("/api/v1/opt-outs", { action, messagingChannelId: "ch_unknown", phone: newPhone() });
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    }
    const manual = await api(org).post(`/admin/v1/organizations/${org}/opt-outs`, { messagingChannelId: "ch_unknown", phone: newPhone() });
    expect(manual.status).to.equal(404);
    expect(manual.body.error.code).to.equal("CHANNEL_NOT_FOUND");
  });

  it("503 SERVICE_UNAVAILABLE when messaging cannot answer a channel lookup, and nothing is stored", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    harness().silentChannels.add(ch.id);
    const phone = newPhone();
    const res = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone });
    expect(res.status).to.equal(503);
    expect(res.body.error.code).to.equal("SERVICE_UNAVAILABLE");
    const rows = await harness().svc.deps.db.query(`SELECT 1 FROM contacts.opt_outs WHERE organization_id = $1`, [org]);
    expect(rows).to.have.length(0);
  });

  it("a channel copied from sys.channel.upserted needs no lookup", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    harness().channels.delete(ch.id); // messaging's lookup would say null now
    harness().silentChannels.add(ch.id); // and would not even answer
    await publishChannel(ch);
    const res = await eventually(async () => {
      const r = await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: newPhone() });
      return r.status === 200 && r;
    });
    expect(res.body.active).to.equal(true);
  });

  it("a channel found by lookup is kept locally", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: newPhone() }).expect(200);
    harness().silentChannels.add(ch.id);
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: newPhone() }).expect(200);
  });

  it("401 without the internal token", async () => {
    const res = await request(harness().svc.url)
      .post("/api/v1/opt-outs")
      .set("x-organization-id", newOrg())
      .send({ action: "set", messagingChannelId: "ch_x", phone: "+14155550100" });
    expect(res.status).to.equal(401);
    expect(res.body.error.code).to.equal("UNAUTHORIZED");
  });
});
