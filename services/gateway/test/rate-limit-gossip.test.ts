import { expect } from "chai";
import { Bus } from "@platform/bus";
import type { RateLimit } from "@platform/contracts";
import { createMetrics } from "@platform/http";
import { createLogger } from "@platform/logging";
import { randomSuffix, TEST_NATS_URL } from "@platform/testing";
import { RateLimiter } from "../src/rate-limit/limiter";
import { instrumentRateLimitSync } from "../src/rate-limit/metrics";

/** One event-loop turn: every setImmediate queued before this one has run (the limiter's coalesced publish among them). */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The usage broadcast through memory, for a pure unit test of the flush policy: a message reaches every subscriber
 * (as on NATS; a limiter ignores its own) one event-loop turn after it was sent (one bus hop), so the next request is
 * decided before it lands.
 */
class MemoryBus {
  private handlers: Array<(payload: unknown) => void> = [];
  broadcast(_def: unknown, payload: unknown): void {
    const copy = JSON.parse(JSON.stringify(payload));
    setImmediate(() => this.handlers.forEach((h) => h(copy)));
  }
  onBroadcast(_def: unknown, handler: (payload: unknown) => void): void {
    this.handlers.push(handler);
  }
}

/**
 * `requests` requests spread round-robin over `replicas` limiters sharing a MemoryBus, `msPerRequest` apart on a
 * manual clock, `perTurn` of them per event-loop turn (a busy gateway handles several per turn). Returns what was
 * admitted, the budget (burst + refill over the run) and the prompt publishes per replica.
 */
async function simulate(opts: { replicas: number; limit: RateLimit; requests: number; perTurn: number; msPerRequest: number }) {
  let now = 0;
  const bus = new MemoryBus();
  const limiters = Array.from({ length: opts.replicas }, (_, i) => new RateLimiter(`gw-${i}`, bus as unknown as Bus, 200, () => now));
  limiters.forEach((r) => r.start());
  let admitted = 0;
  try {
    for (let i = 0; i < opts.requests; i++) {
      if (limiters[i % opts.replicas].take("org", opts.limit).allowed) admitted++;
      now += opts.msPerRequest;
      if ((i + 1) % opts.perTurn === 0) await turn();
    }
  } finally {
    limiters.forEach((r) => r.stop());
  }
  const seconds = now / 1000;
  return { admitted, budget: opts.limit.burst + opts.limit.perSecond * seconds, seconds, prompt: limiters.map((r) => r.stats.promptPublishes) };
}

/** The lower and upper ends of "within 10 % of the budget", as the replicas check has them. */
const within10 = (budget: number): [number, number] => [Math.floor(budget * 0.9), Math.ceil(budget * 1.1)];

describe("rate-limit gossip: two replicas share one budget (unit, in-memory bus, manual clock)", () => {
  // 2 × burst requests alternating between two replicas, 5 ms apart on the manual clock, one event-loop turn each
  // (a request's own turn, like the HTTP front's), at 1 token per second: what the replicas admit together must stay
  // within 10 % of the burst plus what refilled meanwhile. Before the prompt publish (the 200 ms timer only, which
  // does not fire in so short a run) each replica admitted a whole burst of its own here: 20, 200, 2,000.
  for (const burst of [10, 100, 1_000]) {
    it(`admits within 10 % of one budget for a burst of ${burst}`, async () => {
      let now = 0;
      const bus = new MemoryBus();
      const limit: RateLimit = { perSecond: 1, burst };
      const replicas = ["gw-a", "gw-b"].map((id) => new RateLimiter(id, bus as unknown as Bus, 200, () => now));
      replicas.forEach((r) => r.start());
      try {
        let admitted = 0;
        for (let i = 0; i < 2 * burst; i++) {
          if (replicas[i % 2].take("org", limit).allowed) admitted++;
          await turn();
          now += 5;
        }
        const budget = burst + limit.perSecond * (now / 1000);
        const [low, high] = within10(budget);
        expect(admitted, `admitted ${admitted} of a budget of ${budget.toFixed(1)}`).to.be.within(low, high);
      } finally {
        replicas.forEach((r) => r.stop());
      }
    });
  }
});

describe("rate-limit gossip: three replicas (unit, in-memory bus, manual clock)", () => {
  for (const burst of [10, 100, 1_000]) {
    it(`admit within 10 % of one budget for a burst of ${burst}, round-robin, one request per turn`, async () => {
      const r = await simulate({ replicas: 3, limit: { perSecond: 1, burst }, requests: 3 * burst, perTurn: 1, msPerRequest: 5 });
      const [low, high] = within10(r.budget);
      expect(r.admitted, `admitted ${r.admitted} of a budget of ${r.budget.toFixed(1)}`).to.be.within(low, high);
    });
  }
});

describe("rate-limit gossip: a replica that has not served the organization yet (unit, in-memory bus, manual clock)", () => {
  it("opens its bucket from the other replica's usage instead of starting on a fresh burst", async () => {
    let now = 0;
    const bus = new MemoryBus();
    const limit: RateLimit = { perSecond: 1, burst: 10 };
    const [a, b] = ["gw-a", "gw-b"].map((id) => new RateLimiter(id, bus as unknown as Bus, 200, () => now));
    [a, b].forEach((r) => r.start());
    try {
      // A sticky balancer: the whole burst on A, then the organization's next requests on B.
      let admitted = 0;
      for (let i = 0; i < 10; i++) {
        if (a.take("org", limit).allowed) admitted++;
        await turn();
      }
      await turn(); // the last usage lands on B
      for (let i = 0; i < 10; i++) {
        if (b.take("org", limit).allowed) admitted++;
        await turn();
      }
      expect(admitted).to.equal(10);
      expect(b.buckets.tokens("org")).to.be.below(1);
    } finally {
      [a, b].forEach((r) => r.stop());
    }
  });
});

describe("rate-limit gossip: what the prompt publish costs (unit, in-memory bus, manual clock)", () => {
  it("a gateway at 20,000 requests per second for an organization with a huge burst publishes on the timer only", async () => {
    // The bench's organization: 1,000,000 per second, burst 1,000,000; 10 requests per turn.
    const r = await simulate({ replicas: 1, limit: { perSecond: 1_000_000, burst: 1_000_000 }, requests: 20_000, perTurn: 10, msPerRequest: 0.05 });
    expect(r.admitted).to.equal(20_000);
    expect(r.prompt).to.deep.equal([0]);
  });

  it("draining a burst of 100,000 over two replicas costs one prompt publish per hundred admissions at most", async () => {
    const r = await simulate({ replicas: 2, limit: { perSecond: 100, burst: 100_000 }, requests: 220_000, perTurn: 10, msPerRequest: 0.01 });
    const [low, high] = within10(r.budget);
    expect(r.admitted, `admitted ${r.admitted} of a budget of ${r.budget.toFixed(1)}`).to.be.within(low, high);
    const publishes = r.prompt.reduce((a, b) => a + b, 0);
    expect(publishes, `${publishes} prompt publishes for ${r.admitted} admissions`).to.be.at.most(r.admitted / 100);
  });

  it("at the limit (10,000 per second, burst 1,000, asked twice that) a replica publishes a few hundred times per second, not per admission", async () => {
    const r = await simulate({ replicas: 2, limit: { perSecond: 10_000, burst: 1_000 }, requests: 80_000, perTurn: 20, msPerRequest: 0.025 });
    const [low, high] = within10(r.budget);
    expect(r.admitted, `admitted ${r.admitted} of a budget of ${r.budget.toFixed(1)}`).to.be.within(low, high);
    // Each replica admits about 5,000 per second; a prompt publish carries at least 31 (1/32 of the burst).
    for (const p of r.prompt) expect(p / r.seconds, `${p} prompt publishes in ${r.seconds} s`).to.be.at.most(250);
  });
});

describe("rate-limit gossip: two replicas on real NATS share one budget", () => {
  const log = createLogger("gateway-test", "silent");
  const namespace = `rl${randomSuffix()}`;
  let buses: Bus[] = [];
  before(async () => {
    buses = await Promise.all(["gw-a", "gw-b"].map((name) => Bus.connect({ url: TEST_NATS_URL, namespace, name, log })));
  });
  after(() => Promise.all(buses.map((b) => b.close())));

  // Interleaved requests, each one after the usage published so far has landed (requests further apart than one bus
  // hop, as the replicas check's 5 ms are): `nc.flush()` on the sender, then on the receiver, is a PING/PONG behind
  // every message in between, so what the replicas decide depends only on what the limiter published, not on timing.
  for (const burst of [10, 100, 1_000]) {
    it(`admits within 10 % of one budget for a burst of ${burst}`, async () => {
      let now = 0;
      const limit: RateLimit = { perSecond: 1, burst };
      const org = `org-${burst}`;
      const limiters = buses.map((bus, i) => new RateLimiter(`gw-${i}-${randomSuffix()}`, bus, 200, () => now));
      limiters.forEach((r) => r.start());
      await Promise.all(buses.map((b) => b.nc.flush())); // the subscriptions are in place on the server
      try {
        let admitted = 0;
        for (let i = 0; i < 2 * burst; i++) {
          if (limiters[i % 2].take(org, limit).allowed) admitted++;
          await turn();
          await buses[i % 2].nc.flush();
          await buses[(i + 1) % 2].nc.flush();
          now += 5;
        }
        const budget = burst + limit.perSecond * (now / 1000);
        const [low, high] = within10(budget);
        expect(admitted, `admitted ${admitted} of a budget of ${budget.toFixed(1)}`).to.be.within(low, high);
      } finally {
        limiters.forEach((r) => r.stop());
      }
    });
  }
});

describe("rate-limit gossip: the usage messages on /metrics", () => {
  it("counts what each replica published (prompt, timer) and received, as the limiter tallied them", async () => {
    let now = 0;
    const bus = new MemoryBus();
    const replicas = ["gw-a", "gw-b"].map((id) => new RateLimiter(id, bus as unknown as Bus, 200, () => now));
    const metrics = replicas.map(() => createMetrics("gateway"));
    replicas.forEach((r, i) => instrumentRateLimitSync(metrics[i], r));
    replicas.forEach((r) => r.start());
    try {
      const sample = async (i: number) => {
        const text = await metrics[i].registry.metrics();
        const value = (kind: string) => Number(new RegExp(`^gateway_rate_limit_sync_messages_total\\{kind="${kind}",service="gateway"\\} (\\S+)$`, "m").exec(text)?.[1]);
        return { prompt: value("prompt"), timer: value("timer"), received: value("received") };
      };
      expect(await sample(0)).to.deep.equal({ prompt: 0, timer: 0, received: 0 });
      const limit: RateLimit = { perSecond: 1, burst: 100 };
      for (let i = 0; i < 200; i++) {
        replicas[i % 2].take("org", limit);
        await turn();
        now += 5;
      }
      await turn();
      for (const [i, r] of replicas.entries()) {
        expect(r.stats.promptPublishes, "the run made prompt publishes").to.be.greaterThan(0);
        expect(await sample(i)).to.deep.equal({ prompt: r.stats.promptPublishes, timer: r.stats.timerPublishes, received: r.stats.received });
      }
      // A second scrape adds only what happened since the first.
      expect(await sample(0)).to.deep.equal({ prompt: replicas[0].stats.promptPublishes, timer: replicas[0].stats.timerPublishes, received: replicas[0].stats.received });
    } finally {
      replicas.forEach((r) => r.stop());
    }
  });
});
