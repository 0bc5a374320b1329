import { expect } from "chai";
import { createLogger } from "@platform/logging";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ArrivalLinger, Batcher, BoundedMap, CpuPressure, Lifecycle, LoadGate, waitFor } from "../src";

const log = createLogger("runtime-test", "silent");

describe("runtime", () => {
  it("BoundedMap keeps at most its size: setting a key makes it the newest, the oldest goes first", () => {
    const map = new BoundedMap<string, number>(2);
    map.set("a", 1).set("b", 2);
    map.set("a", 3); // a is now the newest
    map.set("c", 4);
    expect([...map.entries()]).to.deep.equal([["a", 3], ["c", 4]]);
    expect(map.get("b")).to.equal(undefined);
  });

  it("waitFor retries a failing startup step until it succeeds", async () => {
    let calls = 0;
    const value = await waitFor(
      "flaky",
      async () => {
        calls++;
        if (calls < 3) throw new Error("not yet");
        return "up";
      },
      log,
    );
    expect(value).to.equal("up");
    expect(calls).to.equal(3);
  });

  it("Lifecycle closes in reverse order of registration and survives a failing closer", async () => {
    const order: string[] = [];
    const life = new Lifecycle(log);
    life.onStop("db", () => {
      order.push("db");
    });
    life.onStop("broken", () => {
      throw new Error("x");
    });
    life.onStop("http", async () => {
      order.push("http");
    });
    await life.stop();
    expect(order).to.deep.equal(["http", "db"]);
  });
});

describe("Batcher", () => {
  it("runs the calls of one event-loop turn together, and coalesces those that arrive while a batch is in flight", async () => {
    const seen: number[][] = [];
    // The first batch stays in flight until the test releases it (no timer races on a busy machine).
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const batcher = new Batcher<number, number>(async (_key, items) => {
      seen.push(items);
      if (seen.length === 1) await gate;
      return items.map((n) => n * 2);
    });
    const first = [1, 2].map((n) => batcher.submit("k", n));
    // Later turns, while [1, 2] is in flight.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(seen).to.deep.equal([[1, 2]]);
    const second = batcher.submit("k", 3);
    await new Promise((r) => setImmediate(r));
    const third = batcher.submit("k", 4);
    release();
    expect(await Promise.all([...first, second, third])).to.deep.equal([2, 4, 6, 8]);
    expect(seen).to.deep.equal([[1, 2], [3, 4]]);
    expect(await batcher.submit("other", 5)).to.equal(10);
    expect(batcher.batches).to.equal(3);
  });

  it("with lingerMs, calls of later turns arriving within the linger share the first batch of an idle key", async () => {
    const seen: number[][] = [];
    const batcher = new Batcher<number, number>(
      async (_key, items) => {
        seen.push(items);
        return items.map((n) => n * 2);
      },
      500,
      1,
      200,
    );
    const first = batcher.submit("k", 1);
    // Two later turns (a timer of 200 ms cannot fire before the check phase of this very loop iteration).
    await new Promise((r) => setImmediate(r));
    const second = batcher.submit("k", 2);
    expect(await Promise.all([first, second])).to.deep.equal([2, 4]);
    expect(seen).to.deep.equal([[1, 2]]);
  });

  it("with an ArrivalLinger, the first call of an idle key waits in a stream and not for a trickle", async () => {
    let now = 0;
    const linger = new ArrivalLinger(5, 10_000, () => now);
    const seen: number[][] = [];
    const batcher = new Batcher<number, number>(
      async (_key, items) => {
        seen.push(items);
        return items;
      },
      500,
      1,
      linger,
    );
    // A trickle (the key's first call, then one 50 s later): each starts at the end of its turn.
    await batcher.submit("k", 1);
    now += 50_000;
    await batcher.submit("k", 2);
    expect(seen).to.deep.equal([[1], [2]]);
    // A stream on another key (calls 500 ms apart on the linger's clock, under its 10 s bound): the first call of the
    // idle key waits about two gaps (1 s of real time here), and a call of a later turn joins it.
    for (let i = 0; i < 3; i++) {
      now += 500;
      linger.arrived("s");
    }
    now += 500;
    const first = batcher.submit("s", 5);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(seen).to.have.length(2);
    now += 500;
    expect(await Promise.all([first, batcher.submit("s", 6)])).to.deep.equal([5, 6]);
    expect(seen.slice(2)).to.deep.equal([[5, 6]]);
  });

  it("with maxInFlight 2, calls arriving while a batch is in flight start a second batch at once, never a third", async () => {
    const seen: number[][] = [];
    const gates: Array<() => void> = [];
    let inFlight = 0;
    let most = 0;
    const batcher = new Batcher<number, number>(
      async (_key, items) => {
        seen.push(items);
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise<void>((r) => gates.push(r));
        inFlight--;
        return items.map((n) => n * 2);
      },
      500,
      2,
    );
    const turn = () => new Promise((r) => setImmediate(r));
    const first = batcher.submit("k", 1);
    await turn();
    expect(seen).to.deep.equal([[1]]);
    // The first is in flight (held by its gate): the next call does not wait for it.
    const second = [2, 3].map((n) => batcher.submit("k", n));
    await turn();
    expect(seen).to.deep.equal([[1], [2, 3]]);
    // Two in flight: later calls wait, together, for one of them to finish.
    const third = [4, 5].map((n) => batcher.submit("k", n));
    await turn();
    await turn();
    expect(seen).to.have.length(2);
    gates[0]();
    expect(await first).to.equal(2);
    while (seen.length < 3) await turn();
    expect(seen[2]).to.deep.equal([4, 5]);
    gates[1]();
    gates[2]();
    expect(await Promise.all([...second, ...third])).to.deep.equal([4, 6, 8, 10]);
    expect(most).to.equal(2);
    expect(batcher.batches).to.equal(3);
  });

  it("rejects every call of a failed batch, and keeps working", async () => {
    let fail = true;
    const batcher = new Batcher<number, number>(async (_key, items) => {
      if (fail) throw new Error("down");
      return items;
    });
    const outcomes = await Promise.allSettled([batcher.submit("k", 1), batcher.submit("k", 2)]);
    expect(outcomes.every((o) => o.status === "rejected")).to.equal(true);
    fail = false;
    expect(await batcher.submit("k", 3)).to.equal(3);
  });
});

describe("ArrivalLinger", () => {
  const clock = () => {
    const c = { now: 0, linger: undefined as unknown as ArrivalLinger };
    c.linger = new ArrivalLinger(5, 20, () => c.now);
    return c;
  };
  const arrive = (c: ReturnType<typeof clock>, gapsMs: number[], key = "k") => {
    for (const gap of gapsMs) {
      c.now += gap;
      c.linger.arrived(key);
    }
  };

  it("waits about two average gaps in a stream, within its bounds", () => {
    const c = clock();
    arrive(c, [0, 7, 7, 7, 7]);
    expect(c.linger.delayMs("k")).to.equal(14);
    // Two gaps past the upper bound: the upper bound.
    arrive(c, Array(30).fill(11));
    expect(c.linger.delayMs("k")).to.be.closeTo(20, 1e-9);
    // Faster than the lower bound: the lower bound (what a fixed linger would wait).
    arrive(c, Array(30).fill(1));
    expect(c.linger.delayMs("k")).to.equal(5);
    // Gaps over the upper bound: no stream, no wait.
    arrive(c, Array(30).fill(25));
    expect(c.linger.delayMs("k")).to.equal(0);
  });

  it("does not wait for a key's first call, a trickle, or the first call after a pause", () => {
    const c = clock();
    arrive(c, [0]);
    expect(c.linger.delayMs("k")).to.equal(0);
    expect(c.linger.delayMs("never seen")).to.equal(0);
    arrive(c, [1_000, 1_000, 1_000]);
    expect(c.linger.delayMs("k")).to.equal(0);
    // A stream, then a pause: the call after the pause goes at once, and the stream after it lingers again.
    arrive(c, Array(40).fill(2));
    expect(c.linger.delayMs("k")).to.equal(5);
    arrive(c, [500]);
    expect(c.linger.delayMs("k")).to.equal(0);
    arrive(c, [2, 2, 2, 2, 2, 2]);
    expect(c.linger.delayMs("k")).to.be.within(5, 20);
  });

  it("counts the calls of a burst (under 1 ms after its first) as one arrival", () => {
    const c = clock();
    // Bursts of five calls every 8 ms: the gap is 8 ms (a wait of 16), not the 1.6 ms average of every call.
    for (let i = 0; i < 10; i++) arrive(c, [7.4, 0, 0.2, 0.2, 0.2]);
    expect(c.linger.delayMs("k")).to.be.closeTo(16, 1e-9);
  });

  it("keeps keys apart, and forgets quiet ones once it holds many", () => {
    const c = clock();
    arrive(c, [0, 8, 8], "busy");
    arrive(c, [0, 1_000], "quiet");
    expect(c.linger.delayMs("busy")).to.equal(16);
    expect(c.linger.delayMs("quiet")).to.equal(0);
    for (let i = 0; i < 10_000; i++) c.linger.arrived(`key ${i}`);
    // At 10,000 keys, a new one makes it forget those quiet for over 80 ms (4 × the upper bound): here all of them.
    c.now += 1_000;
    c.linger.arrived("one more");
    expect(c.linger.size).to.equal(1);
  });

  it("refuses bounds that cannot hold", () => {
    expect(() => new ArrivalLinger(10, 5)).to.throw(RangeError);
    expect(() => new ArrivalLinger(-1, 5)).to.throw(RangeError);
  });
});

describe("LoadGate", () => {
  it("is busy while someone waits for a connection, and calm() resolves at the first calm sample", async () => {
    let waiting = 1;
    const gate = new LoadGate({ lagMs: 0, sampleMs: 10, waiting: () => waiting });
    try {
      expect(gate.busy).to.equal(true);
      let calmed = false;
      const calm = gate.calm(60_000).then(() => (calmed = true));
      await new Promise((r) => setTimeout(r, 30));
      expect(calmed).to.equal(false);
      waiting = 0;
      expect(gate.busy).to.equal(false);
      await calm;
      expect(gate.holds).to.equal(1);
    } finally {
      gate.stop();
    }
  });

  it("counts a blocked event loop as busy", async () => {
    const gate = new LoadGate({ lagMs: 20, sampleMs: 100 });
    try {
      expect(gate.busy).to.equal(false);
      await new Promise((r) => setTimeout(r, 30)); // the delay monitor's first ticks
      // Block the loop past a whole window.
      const until = Date.now() + 250;
      while (Date.now() < until) {
        /* busy */
      }
      // The sample that follows marks the process busy for one window: watch for it.
      let sawBusy = false;
      for (let i = 0; i < 100 && !sawBusy; i++) {
        sawBusy = gate.busy;
        await new Promise((r) => setTimeout(r, 2));
      }
      expect(sawBusy).to.equal(true);
    } finally {
      gate.stop();
    }
  });

  it("is never busy while the process serves no request (another process taking the CPU is not a reason)", async () => {
    let serving = false;
    const gate = new LoadGate({ lagMs: 0, sampleMs: 10, waiting: () => 1, serving: () => serving });
    try {
      expect(gate.busy).to.equal(false);
      serving = true;
      expect(gate.busy).to.equal(true);
    } finally {
      gate.stop();
    }
  });

  it("is busy while API requests are served anywhere and the CPU is short, also in a process that serves nobody", () => {
    let pressure: number | undefined = 0.5;
    let interactive = true;
    // Serves nobody itself, no lag, nobody waiting: only the stack-wide signal can make it busy.
    const gate = new LoadGate({
      lagMs: 0,
      sampleMs: 60_000,
      serving: () => false,
      interactive: () => interactive,
      cpuPressure: () => pressure,
      pressureShare: 0.2,
    });
    try {
      gate.sample();
      expect(gate.busy).to.equal(true);
      // Nobody to protect: the background work may take the CPU.
      interactive = false;
      expect(gate.busy).to.equal(false);
      interactive = true;
      // Enough CPU (or no figure from the kernel): calm again at the next sample.
      pressure = 0.1;
      gate.sample();
      expect(gate.busy).to.equal(false);
      pressure = undefined;
      gate.sample();
      expect(gate.busy).to.equal(false);
    } finally {
      gate.stop();
    }
  });

  it("never counts CPU pressure when its share is 0", () => {
    const gate = new LoadGate({ lagMs: 0, sampleMs: 60_000, interactive: () => true, cpuPressure: () => 1, pressureShare: 0 });
    try {
      gate.sample();
      expect(gate.busy).to.equal(false);
    } finally {
      gate.stop();
    }
  });

  it("reads the CPU pressure only while API requests are served somewhere (an idle stack reads no file)", () => {
    let interactive = false;
    let reads = 0;
    const gate = new LoadGate({
      lagMs: 0,
      sampleMs: 60_000,
      interactive: () => interactive,
      cpuPressure: () => (reads++, 0.5),
      pressureShare: 0.2,
    });
    try {
      gate.sample();
      gate.sample();
      expect(reads).to.equal(0);
      expect(gate.busy).to.equal(false);
      interactive = true;
      gate.sample();
      expect(reads).to.equal(1);
      expect(gate.busy).to.equal(true);
      // Quiet again: the short CPU no longer counts, and the file is left alone.
      interactive = false;
      gate.sample();
      expect(reads).to.equal(1);
      interactive = true;
      expect(gate.busy).to.equal(false);
    } finally {
      gate.stop();
    }
  });

  it("runs the event-loop delay monitor only while the process serves requests", () => {
    let serving = false;
    const gate = new LoadGate({ lagMs: 20, sampleMs: 60_000, serving: () => serving });
    try {
      expect(gate.monitoringLag).to.equal(false);
      serving = true;
      gate.sample();
      expect(gate.monitoringLag).to.equal(true);
      gate.sample();
      expect(gate.monitoringLag).to.equal(true);
      serving = false;
      gate.sample();
      expect(gate.monitoringLag).to.equal(false);
      expect(gate.busy).to.equal(false);
    } finally {
      gate.stop();
    }
  });

  it("calm() gives up after maxMs, so a consumer always moves on", async () => {
    const gate = new LoadGate({ lagMs: 0, sampleMs: 10, waiting: () => 1 });
    try {
      await gate.calm(30);
      expect(gate.busy).to.equal(true);
    } finally {
      gate.stop();
    }
  });
});

describe("CpuPressure", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "psi-"));
  const psi = (file: string, someTotal: number) =>
    writeFileSync(file, `some avg10=0.00 avg60=0.00 avg300=0.00 total=${someTotal}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n`);

  it("reads the first pressure file the kernel keeps, and gives the share of stalled time since the previous read", () => {
    const file = path.join(dir, "cpu.pressure");
    psi(file, 1_000);
    const pressure = new CpuPressure([path.join(dir, "missing"), file]);
    expect(pressure.available).to.equal(true);
    expect(pressure.read()).to.equal(undefined); // no previous read yet
    // Nothing stalled since: 0.
    expect(pressure.read()).to.equal(0);
    // Far more stalled time than can have passed (tasks on many CPUs): capped at 1.
    psi(file, 1_000 + 3_600e6);
    expect(pressure.read()).to.equal(1);
  });

  it("gives no share over a window longer than a second (the reader was idle): that read only sets the baseline", () => {
    const file = path.join(dir, "cpu.pressure.idle");
    psi(file, 0);
    let nowUs = 0;
    const pressure = new CpuPressure([file], () => nowUs);
    expect(pressure.read()).to.equal(undefined);
    nowUs += 50_000;
    psi(file, 25_000);
    expect(pressure.read()).to.equal(0.5);
    nowUs += 5_000_000;
    psi(file, 5_000_000);
    expect(pressure.read()).to.equal(undefined);
    nowUs += 50_000;
    expect(pressure.read()).to.equal(0);
  });

  it("is unavailable where no pressure file exists (not Linux, old kernel)", () => {
    const pressure = new CpuPressure([path.join(dir, "none")]);
    expect(pressure.available).to.equal(false);
    expect(pressure.read()).to.equal(undefined);
  });
});
