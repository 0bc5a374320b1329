import { expect } from "chai";
import { Client } from "pg";
import { createTestEnvironment, eventually } from "../src";

describe("testing harness", () => {
  it("gives a run its own database and removes it afterwards", async () => {
    const env = await createTestEnvironment("harness");
    const client = new Client({ connectionString: env.databaseUrl });
    await client.connect();
    await client.query("SELECT 1");
    await client.end();
    expect(env.namespace).to.match(/^harness_[0-9a-f]{8}$/);
    await env.cleanup();
    const admin = new Client({ connectionString: Object.assign(new URL(env.databaseUrl), { pathname: "/postgres" }).toString() });
    await admin.connect();
    const found = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [new URL(env.databaseUrl).pathname.slice(1)]);
    await admin.end();
    expect(found.rowCount).to.equal(0);
  });

  it("eventually waits for a condition and fails with a clear message", async () => {
    let n = 0;
    expect(await eventually(() => (++n >= 3 ? n : undefined), 1_000, 5)).to.equal(3);
    try {
      await eventually(() => false, 100, 10);
      expect.fail("should time out");
    } catch (err) {
      expect((err as Error).message).to.match(/not met within 100 ms/);
    }
  });
});
