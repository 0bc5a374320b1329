import { expect } from "chai";
import request from "supertest";
import { GatewayHarness } from "./harness";

describe("gateway: errors", () => {
  const h = new GatewayHarness();
  before(() => h.start());
  after(() => h.stop());

  it("answers VALIDATION_ERROR with dotted paths", async () => {
    const res = await h.admin().post("/admin/v1/organizations").send({ name: "", plan: "gold", rateLimit: { perSecond: 0 } }).expect(400);
    expect(res.body.error.code).to.equal("VALIDATION_ERROR");
    const paths = res.body.error.details.map((d: { path: string }) => d.path);
    expect(paths).to.include.members(["name", "plan", "rateLimit.perSecond", "rateLimit.burst"]);
  });

  it("answers INVALID_JSON for a malformed body", async () => {
    const res = await h.admin().post("/admin/v1/organizations").set("Content-Type", "application/json").send('{"name": ').expect(400);
    expect(res.body).to.deep.equal({ error: { code: "INVALID_JSON", message: "The body is not valid JSON" } });
  });

  it("answers PAYLOAD_TOO_LARGE over 1 MB", async () => {
    const res = await h.admin().post("/admin/v1/organizations").send({ name: "x".repeat(1_100_000) }).expect(413);
    expect(res.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
  });

  it("answers a VALIDATION_ERROR, not a 500, for a body that is not an object", async () => {
    const res = await h.admin().post("/admin/v1/organizations").set("Content-Type", "application/json").send("[1,2]").expect(400);
    expect(res.body.error.code).to.equal("VALIDATION_ERROR");
  });

  it("answers 404 NOT_FOUND envelopes for unknown paths and organizations", async () => {
    const res = await request(h.url).get("/no/such/path").expect(404);
    expect(res.body.error.code).to.equal("NOT_FOUND");
    await h.admin().get("/admin/v1/organizations/org_missing").expect(404);
    await h.admin().patch("/admin/v1/organizations/org_missing").send({ plan: "growth" }).expect(404);
    await h.admin().post("/admin/v1/organizations/org_missing/api-keys").send({ name: "k" }).expect(404);
    await h.admin().get("/admin/v1/organizations/org_missing/channels").expect(404);
  });

  it("answers INVALID_CURSOR for a cursor it did not issue", async () => {
    const res = await h.admin().get("/admin/v1/organizations?cursor=abc.def").expect(400);
    expect(res.body.error.code).to.equal("INVALID_CURSOR");
    for (const limit of ["0", "1e2", "0x10", "1.0", "+5"]) {
      const bad = await h.admin().get(`/admin/v1/organizations?limit=${encodeURIComponent(limit)}`).expect(400);
      expect(bad.body.error.code).to.equal("VALIDATION_ERROR");
      expect(bad.body.error.details[0].path).to.equal("query.limit");
    }
  });

  it("answers VALIDATION_ERROR for a bad limit and INVALID_CURSOR for a foreign cursor of the API-key list", async () => {
    const { id } = await h.organization();
    const path = `/admin/v1/organizations/${id}/api-keys`;
    for (const limit of ["0", "101", "two"]) {
      const res = await h.admin().get(path).query({ limit }).expect(400);
      expect(res.body.error.code, limit).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details[0].path).to.equal("query.limit");
    }
    const junk = await h.admin().get(`${path}?cursor=junk`).expect(400);
    expect(junk.body.error.code).to.equal("INVALID_CURSOR");
    // A cursor of another list, issued by this gateway, is foreign here.
    await h.admin().post("/admin/v1/organizations").send({ name: "o1" }).expect(201);
    await h.admin().post("/admin/v1/organizations").send({ name: "o2" }).expect(201);
    const orgs = await h.admin().get("/admin/v1/organizations?limit=1").expect(200);
    const foreign = await h.admin().get(path).query({ cursor: orgs.body.nextCursor }).expect(400);
    expect(foreign.body.error.code).to.equal("INVALID_CURSOR");
  });

  it("answers 503 SERVICE_UNAVAILABLE when the owning service is not reachable", async () => {
    const replica = await h.addReplica({ CONTACTS_URL: "http://127.0.0.1:1" });
    const { key } = await h.organization();
    const res = await request(replica.url).get("/api/v1/contacts").set("Authorization", `Bearer ${key}`).expect(503);
    expect(res.body.error.code).to.equal("SERVICE_UNAVAILABLE");
    const ready = await request(replica.url).get("/readyz").expect(503);
    expect(ready.body.checks.contacts).to.not.equal("ok");
  });
});
