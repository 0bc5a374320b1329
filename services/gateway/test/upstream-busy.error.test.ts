import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import request from "supertest";
import { eventually } from "@platform/testing";
import { GatewayHarness } from "./harness";

/** A service that has stalled: it takes calls and answers none until released. */
async function stalledService() {
  const held: http.ServerResponse[] = [];
  let received = 0;
  let endedByCaller = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    received++;
    held.push(res);
    res.once("close", () => {
      if (!res.writableEnded) endedByCaller++;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get received() {
      return received;
    },
    /** Calls the gateway ended before they were answered. */
    get endedByCaller() {
      return endedByCaller;
    },
    /** Answers every held call with 200 and stops holding. */
    release() {
      for (const res of held.splice(0)) if (!res.writableEnded) res.writeHead(200, { "Content-Type": "application/json" }).end('{"ok":true}');
      server.removeAllListeners("request");
      server.on("request", (req, res) => {
        received++;
        req.resume();
        res.writeHead(200, { "Content-Type": "application/json" }).end('{"ok":true}');
      });
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A call through the gateway that may stay unanswered: resolves with its status, or can be abandoned. */
function call(url: string, key: string) {
  const req = http.request(`${url}/api/v1/contacts?limit=1`, { headers: { Authorization: `Bearer ${key}` }, agent: false });
  const status = new Promise<number | string>((resolve) => {
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", (err) => resolve((err as NodeJS.ErrnoException).code ?? err.message));
  });
  req.end();
  return { status, abandon: () => req.destroy() };
}

describe("gateway: a stalled service", () => {
  const h = new GatewayHarness();
  let service: Awaited<ReturnType<typeof stalledService>>;
  before(async () => {
    service = await stalledService();
    await h.start({ CONTACTS_URL: service.url, UPSTREAM_MAX_IN_FLIGHT: "3" });
  });
  after(async () => {
    await service.close();
    await h.stop();
  });

  it("keeps at most UPSTREAM_MAX_IN_FLIGHT calls waiting for it, answers the next 503 with Retry-After at once, and frees a slot when a waiting client leaves", async () => {
    const { key } = await h.organization();
    const waiting = [call(h.url, key), call(h.url, key), call(h.url, key)];
    await eventually(() => service.received === 3, 10_000);

    const refused = await request(h.url).get("/api/v1/contacts?limit=1").set("Authorization", `Bearer ${key}`);
    expect(refused.status).to.equal(503);
    expect(refused.headers["retry-after"]).to.equal("1");
    expect(refused.body).to.deep.equal({ error: { code: "SERVICE_UNAVAILABLE", message: "The contacts service is busy; retry later" } });
    expect(service.received, "the refused call never reached the service").to.equal(3);
    const metrics = await request(h.url).get("/metrics");
    expect(metrics.text).to.match(/^gateway_upstream_busy_total\{service="contacts"\} 1$/m);

    const inFlight = async () => Number(/^gateway_upstream_in_flight\{service="contacts"\} (\d+)$/m.exec((await request(h.url).get("/metrics")).text)?.[1]);
    expect(await inFlight()).to.equal(3);
    // A client that gives up frees its slot: the next call reaches the service.
    waiting[0].abandon();
    await eventually(async () => (await inFlight()) === 2, 10_000);
    // Its call to the service ended with it, so the pool's socket is free too.
    await eventually(() => service.endedByCaller === 1, 10_000);
    const next = call(h.url, key);
    await eventually(() => service.received === 4, 10_000);

    service.release();
    expect(await Promise.all([waiting[1].status, waiting[2].status, next.status])).to.deep.equal([200, 200, 200]);
    expect(await waiting[0].status).to.equal("ECONNRESET");
    // Every slot is free again.
    const after = await Promise.all([1, 2, 3].map(() => request(h.url).get("/api/v1/contacts?limit=1").set("Authorization", `Bearer ${key}`)));
    expect(after.map((r) => r.status)).to.deep.equal([200, 200, 200]);
  });
});

describe("gateway: one organization's calls to a stalled service", () => {
  const h = new GatewayHarness();
  let service: Awaited<ReturnType<typeof stalledService>>;
  before(async () => {
    service = await stalledService();
    // Default share: three quarters of 4 slots.
    await h.start({ CONTACTS_URL: service.url, UPSTREAM_MAX_IN_FLIGHT: "4" });
  });
  after(async () => {
    await service.close();
    await h.stop();
  });

  it("hold at most UPSTREAM_MAX_IN_FLIGHT_PER_ORGANIZATION of its slots: that organization's next call is answered 429 at once, another organization's still reaches the service", async () => {
    const busy = await h.organization();
    const other = await h.organization();
    const waiting = [call(h.url, busy.key), call(h.url, busy.key), call(h.url, busy.key)];
    await eventually(() => service.received === 3, 10_000);

    const refused = await request(h.url).get("/api/v1/contacts?limit=1").set("Authorization", `Bearer ${busy.key}`);
    expect(refused.status).to.equal(429);
    expect(refused.headers["retry-after"]).to.equal("1");
    expect(refused.body).to.deep.equal({ error: { code: "RATE_LIMITED", message: "Too many requests" } });
    expect(service.received, "the refused call never reached the service").to.equal(3);
    const metrics = (await request(h.url).get("/metrics")).text;
    expect(metrics).to.match(/^gateway_upstream_organization_busy_total\{service="contacts"\} 1$/m);
    expect(metrics).to.match(/^gateway_upstream_busy_total\{service="contacts"\} 0$/m);

    // The fourth slot is the other organization's; beyond it the service is full for everyone (503).
    const admitted = call(h.url, other.key);
    await eventually(() => service.received === 4, 10_000);
    const full = await request(h.url).get("/api/v1/contacts?limit=1").set("Authorization", `Bearer ${other.key}`);
    expect(full.status).to.equal(503);

    // A slot its organization frees is its organization's again.
    waiting[0].abandon();
    await eventually(() => service.endedByCaller === 1, 10_000);
    const again = call(h.url, busy.key);
    await eventually(() => service.received === 5, 10_000);

    service.release();
    expect(await Promise.all([waiting[1].status, waiting[2].status, admitted.status, again.status])).to.deep.equal([200, 200, 200, 200]);
  });
});
