import { expect } from "chai";
import { KeywordCache } from "../src/use-cases/keyword-opt-out";

/** A load the test finishes by hand, counting how often it ran. */
function manualLoad() {
  const calls: Array<(v: readonly string[]) => void> = [];
  const load = () => new Promise<readonly string[]>((resolve) => calls.push(resolve));
  return { load, calls };
}

describe("KeywordCache (unit)", () => {
  it("concurrent misses share one read, and the answer is kept", async () => {
    const cache = new KeywordCache(60_000);
    const { load, calls } = manualLoad();
    const a = cache.get("org_1", load);
    const b = cache.get("org_1", load);
    expect(calls.length).to.equal(1);
    calls[0](["ALTO"]);
    expect(await a).to.deep.equal(["ALTO"]);
    expect(await b).to.deep.equal(["ALTO"]);
    expect(await cache.get("org_1", load)).to.deep.equal(["ALTO"]);
    expect(calls.length).to.equal(1);
  });

  it("an eviction beats a read in flight: its stale answer is not stored", async () => {
    const cache = new KeywordCache(60_000);
    const { load, calls } = manualLoad();
    const stale = cache.get("org_1", load);
    cache.evict("org_1"); // the organization sync committed a new list meanwhile
    const fresh = cache.get("org_1", load);
    expect(calls.length).to.equal(2);
    calls[0](["STOP"]);
    calls[1](["BAJA"]);
    expect(await stale).to.deep.equal(["STOP"]);
    expect(await fresh).to.deep.equal(["BAJA"]);
    expect(await cache.get("org_1", load)).to.deep.equal(["BAJA"]);
    expect(calls.length).to.equal(2);
  });

  it("an evicted organization is read again; with a TTL of 0 every message reads", async () => {
    const cache = new KeywordCache(60_000);
    let reads = 0;
    const load = async () => [`K${++reads}`];
    expect(await cache.get("org_1", load)).to.deep.equal(["K1"]);
    cache.evict("org_1");
    expect(await cache.get("org_1", load)).to.deep.equal(["K2"]);
    const uncached = new KeywordCache(0);
    await uncached.get("org_1", load);
    await uncached.get("org_1", load);
    expect(reads).to.equal(4);
  });

  it("a failed read is not kept", async () => {
    const cache = new KeywordCache(60_000);
    let fail = true;
    const load = async () => {
      if (fail) throw new Error("db down");
      return ["STOP"];
    };
    let error: unknown;
    await cache.get("org_1", load).catch((e: unknown) => (error = e));
    expect((error as Error).message).to.equal("db down");
    fail = false;
    expect(await cache.get("org_1", load)).to.deep.equal(["STOP"]);
  });
});
