import { expect } from "chai";
import { checkDependencies, discoverServices, freePort, reachable } from "../src";

describe("stack runner", () => {
  it("says in one line how to get PostgreSQL when it does not answer", async () => {
    const port = await freePort();
    const message = await checkDependencies(`postgres://postgres@127.0.0.1:${port}/x`, "nats://127.0.0.1:4222", 300);
    expect(message).to.be.a("string");
    expect(message).to.not.include("\n");
    expect(message).to.include("PostgreSQL does not answer");
    expect(message).to.include("infra/dev-services.sh");
  });

  it("says in one line how to get NATS when it does not answer", async () => {
    const port = await freePort();
    const message = await checkDependencies(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/x", `nats://127.0.0.1:${port}`, 300);
    expect(message).to.include("NATS does not answer");
  });

  it("finds the machine's PostgreSQL and NATS", async () => {
    expect(await reachable("127.0.0.1", 5432)).to.equal(true);
    expect(await checkDependencies("postgres://postgres@127.0.0.1:5432/x", "nats://127.0.0.1:4222")).to.equal(null);
  });

  it("discovers the built services", () => {
    expect(discoverServices()).to.include("contacts");
    expect(discoverServices()).to.not.include("gateway");
  });
});
