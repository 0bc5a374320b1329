import { expect } from "chai";
import { eventually, setDatabaseOutage } from "@platform/testing";
import { api, createChannel, newOrg, startHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("a database outage", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await startHarness("msgdown");
  });
  after(async function () {
    this.timeout(30_000);
    await setDatabaseOutage(h.env.databaseUrl, false).catch(() => undefined);
    await h.close();
  });

  it("is answered 503 SERVICE_UNAVAILABLE (safe to retry), never 500, and service resumes when it ends", async function () {
    this.timeout(30_000);
    const org = newOrg();
    await createChannel(h, org);
    await setDatabaseOutage(h.env.databaseUrl, true);
    try {
      const list = await api(h, org).get("/api/v1/conversations");
      expect([list.status, list.body.error?.code]).to.deep.equal([503, "SERVICE_UNAVAILABLE"]);
      const send = await api(h, newOrg()).post("/api/v1/messages").send({ to: uniquePhone(), text: "hi" });
      expect([send.status, send.body.error?.code]).to.deep.equal([503, "SERVICE_UNAVAILABLE"]);
      const keyed = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", "outage-1").send({ to: uniquePhone(), text: "hi" });
      expect([keyed.status, keyed.body.error?.code]).to.deep.equal([503, "SERVICE_UNAVAILABLE"]);
    } finally {
      await setDatabaseOutage(h.env.databaseUrl, false);
    }
    await eventually(async () => (await api(h, org).get("/api/v1/conversations")).status === 200, 15_000);
  });
});
