import { expect } from "chai";
import { eventually } from "@platform/testing";
import { E2E } from "./stack";

describe("e2e: the stack through the gateway", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  before(() => e2e.start());
  after(() => e2e.stop());

  it("is ready, with every service answering", async () => {
    const ready = await e2e.call("GET", "/readyz");
    expect(ready.status).to.equal(200);
    for (const name of e2e.stack.names().filter((n) => n !== "gateway" && n !== "provider-simulator")) {
      expect(ready.body.checks[name], name).to.equal("ok");
    }
  });

  it("gives an integrator a key that pings, and refuses it within a second of revocation", async () => {
    const org = await e2e.organization();
    const ping = await e2e.call("GET", "/api/v1/ping", { token: org.key });
    expect(ping.status).to.equal(200);
    expect(ping.body).to.deep.equal({ ok: true, organizationId: org.id });
    const revoked = Date.now();
    expect((await e2e.admin("DELETE", `/admin/v1/organizations/${org.id}/api-keys/${org.keyId}`)).status).to.equal(204);
    await eventually(async () => (await e2e.call("GET", "/api/v1/ping", { token: org.key })).status === 401, 1_000, 20);
    expect(Date.now() - revoked).to.be.lessThan(1_000);
  });

  it("answers every 401 case with the exact envelope", async () => {
    for (const token of [undefined, "", "svc_unknownunknownunknownunknownunknown00", "not-a-key"]) {
      const res = await e2e.call("GET", "/api/v1/ping", { token });
      expect(res.status).to.equal(401);
      expect(res.body).to.deep.equal({ error: { code: "UNAUTHORIZED", message: "Invalid API key" } });
    }
  });

  it("rate-limits one organization without touching another", async () => {
    const noisy = await e2e.organization({ rateLimit: { perSecond: 2, burst: 10 } });
    const quiet = await e2e.organization({ rateLimit: { perSecond: 2, burst: 10 } });
    const results = await Promise.all(Array.from({ length: 30 }, () => e2e.call("GET", "/api/v1/ping", { token: noisy.key })));
    const limited = results.filter((r) => r.status === 429);
    expect(limited.length).to.be.at.least(18);
    expect(limited[0].body).to.deep.equal({ error: { code: "RATE_LIMITED", message: "Too many requests" } });
    expect(Number(limited[0].headers.get("retry-after"))).to.be.at.least(1);
    expect((await e2e.call("GET", "/api/v1/ping", { token: quiet.key })).status).to.equal(200);
  });

  it("serves the OpenAPI document publicly", async () => {
    const doc = await e2e.call("GET", "/api-reference/openapi.json");
    expect(doc.status).to.equal(200);
    expect(doc.body.paths).to.have.property("/api/v1/messages");
  });

  it("restarts a killed service within two seconds", async () => {
    const victim = e2e.stack.names().find((n) => n !== "gateway" && n !== "provider-simulator") ?? "gateway";
    const before = e2e.stack.pid(victim);
    e2e.stack.kill(victim, "SIGKILL");
    await eventually(() => e2e.stack.pid(victim) !== before && e2e.stack.restarts(victim) === 1, 2_000, 20);
    expect(e2e.logs.some((l) => l.includes(`${victim} exited`) && l.includes("restarting"))).to.equal(true);
    await e2e.stack.waitReady(60_000);
  });
});
