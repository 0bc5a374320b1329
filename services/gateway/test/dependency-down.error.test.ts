import { expect } from "chai";
import request from "supertest";
import { eventually, setDatabaseOutage } from "@platform/testing";
import { GatewayHarness } from "./harness";

const UNAVAILABLE = { error: { code: "SERVICE_UNAVAILABLE", message: "A dependency is unavailable; retry later" } };

describe("gateway: a database outage", () => {
  const h = new GatewayHarness();
  before(() => h.start());
  after(async function () {
    this.timeout(30_000);
    await setDatabaseOutage(h.env.databaseUrl, false).catch(() => undefined);
    await h.stop();
  });

  it("answers 503 SERVICE_UNAVAILABLE, never 500, for a key it cannot verify, and serves it again afterwards", async function () {
    this.timeout(30_000);
    const { id, key } = await h.organization(); // not used yet: the key cache is cold for it
    const auth = { Authorization: `Bearer ${key}` };
    await setDatabaseOutage(h.env.databaseUrl, true);
    try {
      const res = await request(h.url).get("/api/v1/ping").set(auth);
      expect([res.status, res.body]).to.deep.equal([503, UNAVAILABLE]);
      const post = await request(h.url).post("/api/v1/messages").set(auth).send({ to: "+15550001111", text: "hi" });
      expect([post.status, post.body]).to.deep.equal([503, UNAVAILABLE]);
      const admin = await h.admin().get(`/admin/v1/organizations/${id}/api-keys`);
      expect([admin.status, admin.body.error?.code]).to.deep.equal([503, "SERVICE_UNAVAILABLE"]);
    } finally {
      await setDatabaseOutage(h.env.databaseUrl, false);
    }
    await eventually(async () => (await request(h.url).get("/api/v1/ping").set(auth)).status === 200, 15_000, 100);
  });
});
