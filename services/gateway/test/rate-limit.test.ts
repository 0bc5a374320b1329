import { expect } from "chai";
import request from "supertest";
import { TokenBuckets } from "../src/rate-limit/token-bucket";
import { eventually } from "@platform/testing";
import { GatewayHarness } from "./harness";

describe("token bucket (unit)", () => {
  it("admits a burst, then refills at the rate", () => {
    let now = 0;
    const buckets = new TokenBuckets(() => now);
    const limit = { perSecond: 2, burst: 3 };
    const results = [1, 2, 3, 4].map(() => buckets.take("o", limit).allowed);
    expect(results).to.deep.equal([true, true, true, false]);
    expect(buckets.take("o", limit).retryAfterSeconds).to.equal(1);
    now += 500;
    expect(buckets.take("o", limit).allowed).to.equal(true);
    expect(buckets.take("o", limit).allowed).to.equal(false);
  });

  it("carries debt from other replicas", () => {
    let now = 0;
    const buckets = new TokenBuckets(() => now);
    const limit = { perSecond: 10, burst: 10 };
    buckets.take("o", limit);
    buckets.debit("o", 14);
    expect(buckets.take("o", limit).allowed).to.equal(false);
    now += 500; // +5 tokens: still at 0
    expect(buckets.take("o", limit).allowed).to.equal(false);
    now += 200;
    expect(buckets.take("o", limit).allowed).to.equal(true);
  });
});

describe("gateway: per-organization rate limit", () => {
  // The limiters run on a manual clock: buckets refill only when a test moves it, so what is admitted depends on the
  // requests and the gossip, never on how fast the machine runs them.
  let now = 1_000;
  const h = new GatewayHarness();
  h.clock = () => now;
  before(() => h.start());
  after(() => h.stop());

  const ping = (url: string, key: string) => request(url).get("/api/v1/ping").set("Authorization", `Bearer ${key}`);

  it("answers 429 RATE_LIMITED with Retry-After over the limit, and leaves other organizations alone", async () => {
    const limited = await h.organization({ rateLimit: { perSecond: 1, burst: 5 } });
    const other = await h.organization({ rateLimit: { perSecond: 1, burst: 5 } });
    const statuses: number[] = [];
    let last: request.Response | undefined;
    for (let i = 0; i < 8; i++) {
      last = await ping(h.url, limited.key);
      statuses.push(last.status);
    }
    expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(last!.body).to.deep.equal({ error: { code: "RATE_LIMITED", message: "Too many requests" } });
    expect(last!.headers["retry-after"]).to.equal("1");
    expect(last!.headers["ratelimit-policy"]).to.equal('"org";q=5;w=5');
    expect(last!.headers["ratelimit"]).to.equal('"org";r=0;t=1');
    const ok = await ping(h.url, other.key).expect(200);
    expect(ok.headers["ratelimit"]).to.equal('"org";r=4;t=1');
    // One second of refill at 1 per second: exactly one more request.
    now += 1_000;
    await ping(h.url, limited.key).expect(200);
    await ping(h.url, limited.key).expect(429);
  });

  it("applies a PATCHed limit at once", async () => {
    const org = await h.organization({ rateLimit: { perSecond: 1, burst: 1 } });
    await ping(h.url, org.key).expect(200);
    await ping(h.url, org.key).expect(429);
    await h.admin().patch(`/admin/v1/organizations/${org.id}`).send({ rateLimit: { perSecond: 1000, burst: 1000 } }).expect(200);
    // 1 ms refills one token at the new rate (a thousandth of one at the old). The clock is frozen, so a refused
    // ping costs nothing: poll until the change's broadcast has evicted the cached policy (its arrival is not ours to time).
    now += 1;
    await eventually(async () => (await ping(h.url, org.key)).status === 200, 10_000);
  });

  it("holds one budget across replicas", async () => {
    const second = await h.addReplica();
    const org = await h.organization({ rateLimit: { perSecond: 1, burst: 20 } });
    const first = h.replicas[0];
    const tokens = (r: typeof first) => r.gateway.limiter.buckets.tokens(org.id);
    const admittedOn = async (url: string, n: number) => {
      let admitted = 0;
      for (let i = 0; i < n; i++) if ((await ping(url, org.key)).status === 200) admitted++;
      return admitted;
    };
    // Both replicas open the organization's bucket (one token each, taken from the buckets directly, so not
    // gossiped): the exchange below starts from known buckets.
    for (const r of h.replicas) r.gateway.limiter.buckets.take(org.id, { perSecond: 1, burst: 20 });
    // 9 on the first replica: the second debits them when the gossip arrives...
    expect(await admittedOn(h.url, 9)).to.equal(9);
    await eventually(() => tokens(second) === 10);
    // ...so it admits only the 10 left of the ONE budget (two independent buckets would admit 12 here).
    expect(await admittedOn(second.url, 12)).to.equal(10);
    await eventually(() => tokens(first) === 0);
    expect(await admittedOn(h.url, 3)).to.equal(0);
  });
});
