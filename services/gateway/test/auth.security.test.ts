import { expect } from "chai";
import request from "supertest";
import { eventually } from "@platform/testing";
import { GatewayHarness } from "./harness";

const INVALID = { error: { code: "UNAUTHORIZED", message: "Invalid API key" } };

describe("gateway: API keys", () => {
  const h = new GatewayHarness();
  before(() => h.start());
  after(() => h.stop());

  it("creates a key shown once as svc_ + 32+ base62 characters and stores only its hash", async () => {
    const { id, key, keyId } = await h.organization();
    expect(key).to.match(/^svc_[0-9A-Za-z]{32,}$/);
    const list = await h.admin().get(`/admin/v1/organizations/${id}/api-keys`).expect(200);
    expect(list.body.items).to.have.length(1);
    expect(list.body.items[0]).to.include({ id: keyId, keyPrefix: key.slice(0, 8), revokedAt: null });
    expect(list.body.items[0]).to.not.have.property("key");
    const rows = await h.db.query(`SELECT * FROM gateway.api_keys WHERE id = $1`, [keyId]);
    expect(JSON.stringify(rows)).to.not.include(key);
  });

  it("answers ping with the key's organization", async () => {
    const { id, key } = await h.organization();
    const res = await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${key}`).expect(200);
    expect(res.body).to.deep.equal({ ok: true, organizationId: id });
  });

  for (const [name, header] of [
    ["a missing header", undefined],
    ["an empty bearer", "Bearer "],
    ["another scheme", "Basic dXNlcjpwYXNz"],
    ["a key without the prefix", "Bearer abcdefghijklmnopqrstuvwxyz0123456789ABCD"],
    ["an unknown well-formed key", "Bearer svc_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
    ["a key with bad characters", "Bearer svc_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"],
  ] as const) {
    it(`refuses ${name} with the exact 401 envelope`, async () => {
      const req = request(h.url).get("/api/v1/ping");
      if (header !== undefined) req.set("Authorization", header);
      const res = await req.expect(401);
      expect(res.body).to.deep.equal(INVALID);
    });
  }

  it("refuses 401 before revealing whether a path exists", async () => {
    const res = await request(h.url).get("/api/v1/nothing-here").expect(401);
    expect(res.body).to.deep.equal(INVALID);
  });

  it("refuses a revoked key on every replica within one second", async () => {
    const other = await h.addReplica();
    const { id, key, keyId } = await h.organization();
    // Warm both replicas' caches.
    await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${key}`).expect(200);
    await request(other.url).get("/api/v1/ping").set("Authorization", `Bearer ${key}`).expect(200);
    await h.admin().delete(`/admin/v1/organizations/${id}/api-keys/${keyId}`).expect(204);
    // The 1 s bound is met by the mechanism, not measured here (a wall-clock bound fails on a busy machine): both
    // caches hold the key for 30 s (their TTL), so a refusal on both within this 10 s deadline can only come from
    // the revocation broadcast evicting it (and on this replica, from the revoking call itself).
    await eventually(async () => {
      const a = await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${key}`);
      const b = await request(other.url).get("/api/v1/ping").set("Authorization", `Bearer ${key}`);
      return a.status === 401 && b.status === 401;
    }, 10_000, 20);
    const list = await h.admin().get(`/admin/v1/organizations/${id}/api-keys`).expect(200);
    expect(list.body.items[0].revokedAt).to.be.a("string");
    expect(list.body.items[0].lastUsedAt).to.be.a("string");
    // Its uses before the revocation were written after it (in the listing's flush), with the time they happened.
    expect(Date.parse(list.body.items[0].lastUsedAt)).to.be.at.most(Date.parse(list.body.items[0].revokedAt));
  });

  it("keeps a key of one organization out of another organization's admin routes", async () => {
    const a = await h.organization();
    const b = await h.organization();
    await h.admin().delete(`/admin/v1/organizations/${b.id}/api-keys/${a.keyId}`).expect(404);
    await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${a.key}`).expect(200);
  });

  it("refuses the admin API without the admin token", async () => {
    const res = await request(h.url).post("/admin/v1/organizations").send({ name: "x" }).expect(401);
    expect(res.body.error.code).to.equal("UNAUTHORIZED");
    await request(h.url).get("/admin/v1/organizations").set("Authorization", "Bearer wrong-token-0123456789").expect(401);
    const { key } = await h.organization();
    await request(h.url).get("/admin/v1/organizations").set("Authorization", `Bearer ${key}`).expect(401);
  });
});
