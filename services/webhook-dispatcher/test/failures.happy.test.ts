import { expect } from "chai";
import { verifySignature } from "@platform/webhook-verify";
import { eventually, jobsSettled, newId, Receiver, startStack, type Stack } from "./helpers";

/** Retries, timeouts, the attempt log and deactivation (delays 150 ms, timeout 1 s in this suite). */
describe("failed deliveries", () => {
  let stack: Stack;
  let receiver: Receiver;
  const behaviour = new Map<string, (index: number) => { status?: number; body?: string; delayMs?: number; headers?: Record<string, string> }>();

  before(async () => {
    stack = await startStack("whd_fail");
    receiver = await Receiver.start((r) => {
      const path = r.path.split("?")[0];
      const fn = behaviour.get(path);
      const index = receiver.requests.filter((q) => q.path === r.path).length - 1;
      return fn ? fn(index) : { status: 200 };
    });
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  async function subscribe(org: string, path: string, events = ["message.sent"]) {
    const res = await stack.admin(org).post("", { url: receiver.url + path, events }).expect(201);
    return res.body as { id: string; secret: string };
  }
  async function log(org: string, id: string) {
    return (await stack.admin(org).get(`/${id}/deliveries?limit=100`).expect(200)).body.items as any[];
  }
  async function webhook(org: string, id: string) {
    return ((await stack.admin(org).get("?limit=100").expect(200)).body.items as any[]).find((w) => w.id === id);
  }

  it("retries a failing endpoint 3 times (1 + 3 attempts), same data.id and same bytes, then stops", async () => {
    const org = newId("organization");
    behaviour.set("/always-500", () => ({ status: 500, body: "boom" }));
    const hook = await subscribe(org, "/always-500");
    const eventId = await stack.publish("message.sent", org);
    await eventually(() => receiver.byEvent(eventId).length === 4, 10_000);
    await jobsSettled(stack, hook.id); // given up: no job left to retry
    const reqs = receiver.byEvent(eventId);
    expect(reqs).to.have.length(4);
    expect(new Set(reqs.map((r) => r.raw.toString("base64"))).size).to.equal(1);
    expect(new Set(reqs.map((r) => r.headers["x-service-delivery"])).size).to.equal(4);
    for (const r of reqs) {
      expect(r.body.data.id).to.equal(eventId);
      expect(r.headers["webhook-id"]).to.equal(eventId);
      expect(verifySignature(r.raw, r.headers["x-service-signature"], hook.secret)).to.equal(true);
    }
    const items = await eventually(async () => {
      const l = await log(org, hook.id);
      return l.length === 4 ? l : undefined;
    });
    expect(items.map((i) => i.attempt)).to.deep.equal([4, 3, 2, 1]);
    expect(items.every((i) => i.responseStatus === 500 && i.responseBody === "boom" && i.eventId === eventId)).to.equal(true);
    expect(items.map((i) => i.id)).to.deep.equal(reqs.map((r) => r.headers["x-service-delivery"]).reverse());
    const w = await webhook(org, hook.id);
    expect(w.consecutiveFailures).to.equal(4);
    expect(w.active).to.equal(true);
  });

  it("a 2xx after failures ends the retries and resets the failure count", async () => {
    const org = newId("organization");
    behaviour.set("/flaky", (i) => (i < 2 ? { status: 503 } : { status: 204 }));
    const hook = await subscribe(org, "/flaky");
    const eventId = await stack.publish("message.sent", org);
    await eventually(async () => (await log(org, hook.id)).length === 3);
    await jobsSettled(stack, hook.id); // delivered: no job left to retry
    expect(receiver.byEvent(eventId)).to.have.length(3);
    expect((await log(org, hook.id)).map((i) => i.responseStatus)).to.deep.equal([204, 503, 503]);
    expect((await webhook(org, hook.id)).consecutiveFailures).to.equal(0);
  });

  it("counts a timeout as a failed attempt and retries it", async () => {
    const org = newId("organization");
    behaviour.set("/slow", (i) => (i === 0 ? { status: 200, delayMs: 1_500 } : { status: 200 }));
    const hook = await subscribe(org, "/slow");
    const eventId = await stack.publish("message.sent", org);
    const items = await eventually(async () => {
      const l = await log(org, hook.id);
      return l.length === 2 ? l : undefined;
    }, 10_000);
    expect(items[1]).to.include({ attempt: 1, responseStatus: null, eventId });
    // What the sender decided: the attempt ended by the configured 1 s timeout (not a measured wall-clock gap).
    expect(items[1].error).to.equal("timeout after 1000 ms");
    expect(items[1].durationMs).to.be.a("number");
    expect(items[0]).to.include({ attempt: 2, responseStatus: 200, error: null });
  });

  it("does not follow redirects (a 3xx is a failure)", async () => {
    const org = newId("organization");
    behaviour.set("/moved", () => ({ status: 302, headers: { location: "/target" } }));
    const hook = await subscribe(org, "/moved");
    const eventId = await stack.publish("message.sent", org);
    await eventually(async () => (await log(org, hook.id)).length >= 1);
    expect((await log(org, hook.id)).at(-1)).to.include({ attempt: 1, responseStatus: 302 });
    expect(receiver.requests.filter((r) => r.path === "/target")).to.have.length(0);
    expect(receiver.byEvent(eventId)[0].path).to.equal("/moved");
  });

  it("keeps the first 1024 characters of a response body in the attempt log", async () => {
    const org = newId("organization");
    const long = "é" + "a".repeat(1500) + "END";
    behaviour.set("/chatty", () => ({ status: 200, body: long }));
    const hook = await subscribe(org, "/chatty");
    await stack.publish("message.sent", org);
    const items = await eventually(async () => {
      const l = await log(org, hook.id);
      return l.length === 1 ? l : undefined;
    });
    expect(items[0].responseBody).to.have.length(1024);
    expect(items[0].responseBody).to.equal(long.slice(0, 1024));
  });

  it("records, retries and counts an attempt whose response body holds NUL bytes (kept as U+FFFD), and a test against it answers 200", async () => {
    const org = newId("organization");
    behaviour.set("/nul", () => ({ status: 500, body: "\0\0bad\0" }));
    const hook = await subscribe(org, "/nul");
    const eventId = await stack.publish("message.sent", org);
    const items = await eventually(async () => {
      const l = await log(org, hook.id);
      return l.length === 4 ? l : undefined;
    }, 15_000);
    expect(items.map((i) => [i.eventId, i.responseStatus, i.responseBody])).to.deep.equal(Array(4).fill([eventId, 500, "\uFFFD\uFFFDbad\uFFFD"]));
    expect(receiver.byEvent(eventId)).to.have.length(4);
    await eventually(async () => (await webhook(org, hook.id)).consecutiveFailures === 4);
    const test = await stack.admin(org).post(`/${hook.id}/test`).expect(200);
    expect(test.body).to.include({ delivered: false, responseStatus: 500 });
  });

  it("deactivates after 10 consecutive failed attempts; nothing is sent until re-enabled, which resets the count", async () => {
    const org = newId("organization");
    let failing = true;
    behaviour.set("/dead", () => (failing ? { status: 500 } : { status: 200 }));
    const hook = await subscribe(org, "/dead");
    const count = () => receiver.requests.filter((r) => r.path === "/dead").length;
    // One event at a time, so the count is exact: 4 + 4 + 2 attempts.
    for (let i = 0; i < 3; i++) {
      const eventId = await stack.publish("message.sent", org);
      await eventually(() => receiver.byEvent(eventId).length === (i < 2 ? 4 : 2), 10_000);
      if (i < 2) await eventually(async () => (await webhook(org, hook.id)).consecutiveFailures === (i + 1) * 4);
    }
    const w = await eventually(async () => {
      const x = await webhook(org, hook.id);
      return x.active === false ? x : undefined;
    });
    expect(w.consecutiveFailures).to.equal(10);
    expect(w.deactivatedAt).to.be.a("string");
    await jobsSettled(stack, hook.id); // deactivation dropped its jobs: no attempt can follow
    expect(count()).to.equal(10);
    // A second, healthy webhook of the organization is the marker: once it got the next event, that event's fan-out
    // was decided, and the deactivated webhook got no job for it.
    const marker = await subscribe(org, "/dead-marker");
    const ignored = await stack.publish("message.sent", org);
    await eventually(() => receiver.byEvent(ignored).some((r) => r.path === "/dead-marker"));
    await jobsSettled(stack, hook.id);
    expect(receiver.byEvent(ignored).map((r) => r.path)).to.deep.equal(["/dead-marker"]);
    await jobsSettled(stack, marker.id);

    failing = false;
    const enabled = await stack.admin(org).patch(`/${hook.id}`, { active: true }).expect(200);
    expect(enabled.body).to.include({ active: true, consecutiveFailures: 0, deactivatedAt: null });
    const after = await stack.publish("message.sent", org);
    await eventually(() => receiver.byEvent(after).filter((r) => r.path === "/dead").length === 1);
  });

  it("send test on a failing endpoint: one attempt, not retried, not counted toward deactivation", async () => {
    const org = newId("organization");
    behaviour.set("/test-fail", () => ({ status: 500, body: "nope" }));
    const hook = await subscribe(org, "/test-fail");
    const res = await stack.admin(org).post(`/${hook.id}/test`).expect(200);
    expect(res.body).to.include({ delivered: false, responseStatus: 500 });
    await jobsSettled(stack, hook.id); // a test send makes no delivery job: nothing to retry
    expect(receiver.requests.filter((r) => r.path === "/test-fail")).to.have.length(1);
    expect((await webhook(org, hook.id)).consecutiveFailures).to.equal(0);
    const items = await log(org, hook.id);
    expect(items).to.have.length(1);
    expect(items[0]).to.include({ event: "webhook.test", attempt: 1, responseStatus: 500, responseBody: "nope" });
  });

  it("a hanging endpoint does not delay deliveries to another endpoint or organization", async function () {
    this.timeout(60_000);
    // Its own stack with a 60 s attempt timeout and 8 attempts per endpoint: the hanging endpoint's attempts hold its
    // lane's 8 slots for the whole test, so what gets through does not depend on how fast the machine is.
    const own = await startStack("whd_hang", { WEBHOOK_TIMEOUT_MS: "60000", WEBHOOK_CONCURRENCY_PER_ENDPOINT: "8" });
    const hanging = await Receiver.start(() => ({ status: 200, delayMs: 120_000 }));
    try {
      const slowOrg = newId("organization");
      const fastOrg = newId("organization");
      await own.admin(slowOrg).post("", { url: hanging.url + "/hang", events: ["message.sent"] }).expect(201);
      await own.admin(fastOrg).post("", { url: receiver.url + "/fast", events: ["message.sent"] }).expect(201);
      // The hanging endpoint has more due deliveries than its in-flight bound.
      for (let i = 0; i < 30; i++) await own.publish("message.sent", slowOrg);
      await eventually(() => hanging.requests.length === 8);
      const fast: string[] = [];
      for (let i = 0; i < 20; i++) fast.push(await own.publish("message.sent", fastOrg));
      await eventually(() => fast.every((id) => receiver.byEvent(id).length === 1));
      // Every fast delivery went out while all 8 of the hanging endpoint's attempts were still running (none can end
      // before 60 s), and that endpoint never got more than its 8 concurrent attempts.
      expect(hanging.requests).to.have.length(8);
    } finally {
      await hanging.close();
      await own.stop();
    }
  });
});
