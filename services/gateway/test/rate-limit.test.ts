import { expect } from "chai";
import request from "supertest";
import { TokenBuckets } from "../src/rate-limit/token-bucket";
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
  const h = new GatewayHarness();
  before(() => h.start());
  after(() => h.stop());

  it("answers 429 RATE_LIMITED with Retry-After over the limit, and leaves other organizations alone", async () => {
    const limited = await h.organization({ rateLimit: { perSecond: 1, burst: 5 } });
    const other = await h.organization({ rateLimit: { perSecond: 1, burst: 5 } });
    const statuses: number[] = [];
    let last: request.Response | undefined;
    for (let i = 0; i < 8; i++) {
      last = await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${limited.key}`);
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 5)).to.deep.equal([200, 200, 200, 200, 200]);
    expect(statuses.slice(5)).to.deep.equal([429, 429, 429]);
    expect(last!.body).to.deep.equal({ error: { code: "RATE_LIMITED", message: "Too many requests" } });
    expect(Number(last!.headers["retry-after"])).to.be.at.least(1);
    expect(last!.headers["ratelimit-policy"]).to.equal('"org";q=5;w=5');
    expect(last!.headers["ratelimit"]).to.match(/^"org";r=0;t=\d+$/);
    const ok = await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${other.key}`).expect(200);
    expect(ok.headers["ratelimit"]).to.equal('"org";r=4;t=1');
  });

  it("applies a PATCHed limit at once", async () => {
    const org = await h.organization({ rateLimit: { perSecond: 1, burst: 1 } });
    await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${org.key}`).expect(200);
    await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${org.key}`).expect(429);
    await h.admin().patch(`/admin/v1/organizations/${org.id}`).send({ rateLimit: { perSecond: 1000, burst: 1000 } }).expect(200);
    await request(h.url).get("/api/v1/ping").set("Authorization", `Bearer ${org.key}`).expect(200);
  });

  it("holds one budget across replicas", async () => {
    const second = await h.addReplica();
    const org = await h.organization({ rateLimit: { perSecond: 1, burst: 20 } });
    let admitted = 0;
    // Alternate between replicas, slower than the gossip interval, for 60 requests.
    for (let i = 0; i < 60; i++) {
      const url = i % 2 === 0 ? h.url : second.url;
      const res = await request(url).get("/api/v1/ping").set("Authorization", `Bearer ${org.key}`);
      if (res.status === 200) admitted++;
      await new Promise((r) => setTimeout(r, 25));
    }
    // One bucket: 20 burst + ~1.5 s of refill; two independent buckets would admit ~43.
    expect(admitted).to.be.within(20, 26);
  });
});
