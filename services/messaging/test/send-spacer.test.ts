import { expect } from "chai";
import { jobSpacingMargin, JobSpacer, SendSpacer, SPACING_TOLERANCE_INTERVALS, WINDOW_MS, windowLimit, windowMs } from "../src/use-cases/pacing";

/** The last step before a provider call: late slots never become a burst above the channel's top rate. */
describe("unit: SendSpacer (provider calls of one process kept one top-rate interval apart)", () => {
  it("spaces calls that arrive together by the interval, per channel", () => {
    const s = new SendSpacer();
    // Ten slots' calls released at the same instant (a late timer): they go out 1 ms apart at 1,000/s.
    expect(Array.from({ length: 10 }, () => s.delay("ch_a", 1, 100))).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Another channel is not held back by the first.
    expect(s.delay("ch_b", 1, 100)).to.equal(0);
  });

  it("never lets more calls than the rate into any one-second window, however they arrive", () => {
    const s = new SendSpacer();
    const at: number[] = [];
    // 3,000 calls at 1,000/s arriving in bursts of 150 every 150 ms, plus 60 late ones at 400 ms.
    const arrivals = [...Array.from({ length: 3_000 }, (_, i) => Math.floor(i / 150) * 150), ...Array.from({ length: 60 }, () => 400)].sort((a, b) => a - b);
    for (const t of arrivals) at.push(t + s.delay("ch", 1, t));
    let most = 0;
    for (let i = 0, j = 0; j < at.length; j++) {
      while (at[j]! - at[i]! >= 1_000) i++;
      most = Math.max(most, j - i + 1);
    }
    expect(most).to.equal(1_000);
  });

  it("keeps at most the rate in any window (a little over a second) on the clock of the calls, however late the process wakes", () => {
    // 3,000 calls due 1 ms apart (1,000/s). The process wakes each one late: 150 ms late through the first 400 ms of
    // calls, then on time (a stall that ends). Spacing is decided on when calls are due, so alone it let the calls of
    // 1,150 ms into one second; the window check waits them out (each wait also woken 3 ms late).
    const s = new SendSpacer();
    const made: number[] = [];
    const lateness = (due: number) => (due < 400 ? 150 : 0);
    for (let i = 0; i < 3_000; i++) {
      const due = i + s.delay("ch", 1, i);
      let at = due + lateness(due);
      for (let w = s.admit("ch", 1_000, at); w > 0; w = s.admit("ch", 1_000, at)) at += w + 3;
      made.push(at);
    }
    made.sort((a, b) => a - b);
    let most = 0;
    for (let i = 0, j = 0; j < made.length; j++) {
      while (made[j]! - made[i]! >= WINDOW_MS) i++;
      most = Math.max(most, j - i + 1);
    }
    expect(most).to.equal(windowLimit(1_000));
    expect(windowLimit(1_000)).to.equal(1_000);
    // Spacing alone (no window check) on the same wake-ups: more than the rate.
    const spaced = new SendSpacer();
    const alone = Array.from({ length: 3_000 }, (_, i) => {
      const due = i + spaced.delay("ch", 1, i);
      return due + lateness(due);
    }).sort((a, b) => a - b);
    let worst = 0;
    for (let i = 0, j = 0; j < alone.length; j++) {
      while (alone[j]! - alone[i]! >= 1_000) i++;
      worst = Math.max(worst, j - i + 1);
    }
    expect(worst).to.be.greaterThan(1_000);
  });

  it("sends the calls whose spaced wake-ups a stall made fire together one interval apart from when they wake", () => {
    const s = new SendSpacer();
    // Fifty calls spaced 1 ms apart at 1,000/s (due at 0 … 49 ms); the process stalls and wakes them all at 60 ms.
    const due = Array.from({ length: 50 }, () => s.delay("ch", 1, 0));
    expect(due[49]).to.equal(49);
    const made = due.map(() => {
      let at = 60;
      for (let w = s.admit("ch", 1_000, at); w > 0; w = s.admit("ch", 1_000, at)) at += w;
      return at;
    });
    // At most the tolerance's few calls together, then one per interval: the stall is lost time, not a burst.
    const together = made.filter((t) => t === 60).length;
    expect(together).to.be.at.most(SPACING_TOLERANCE_INTERVALS + 1);
    expect(made[49]).to.be.at.least(60 + 49 - SPACING_TOLERANCE_INTERVALS);
  });

  it("admits the rate's worth of calls per second on the clock, then answers how long until the oldest leaves the window", () => {
    const s = new SendSpacer();
    // 100/s: the rate's 100 calls one interval apart, from 100 ms on; the 101st waits until the first is WINDOW_MS old.
    const n = windowLimit(100);
    expect(n).to.equal(100);
    expect(WINDOW_MS).to.be.within(1_040, 1_042);
    for (let i = 0; i < n; i++) expect(s.admit("ch", 100, 100 + i * 10)).to.equal(0);
    expect(s.admit("ch", 100, 100 + n * 10)).to.equal(Math.ceil(WINDOW_MS - n * 10));
    expect(s.admit("ch", 100, 100 + WINDOW_MS)).to.equal(0);
    expect(s.admit("ch", 100, 100 + WINDOW_MS)).to.equal(10);
    // A new limit (the channel's rate changed) starts a new window.
    expect(s.admit("ch", 120, 1_100)).to.equal(0);
  });

  it("gates the calls as made: sends let go apart but answered together by their recheck never crowd a window", () => {
    // 80/s. Each send is let go by `turn` (admit) one interval apart, then waits for its opt-out recheck, whose round
    // trip is coalesced: in the first 150 ms of every 1.5 s (a busy moment) the rechecks are answered together at its
    // end, otherwise at once.
    const mps = 80;
    const spacer = new SendSpacer();
    const made: number[] = [];
    const ungated: number[] = [];
    for (let i = 0; i < 800; i++) {
      let let_go = i * 12.5;
      for (let w = spacer.admit("ch", mps, let_go); w > 0; w = spacer.admit("ch", mps, let_go)) let_go += w;
      const answered = let_go % 1_500 < 150 ? let_go - (let_go % 1_500) + 150 : let_go + 1;
      ungated.push(answered);
      let at = answered;
      for (let w = spacer.gate("ch", mps, at); w > 0; w = spacer.gate("ch", mps, at)) at += w;
      made.push(at);
    }
    const densest = (times: number[], span: number) => {
      const t = [...times].sort((a, b) => a - b);
      let most = 0;
      for (let i = 0, j = 0; j < t.length; j++) {
        while (t[j]! - t[i]! >= span) i++;
        most = Math.max(most, j - i + 1);
      }
      return most;
    };
    // Without the gate, the answered-together sends put more than the rate into some second.
    expect(densest(ungated, 1_000)).to.be.greaterThan(mps);
    expect(densest(made, WINDOW_MS)).to.equal(mps);
    expect(densest(made, 1_000)).to.be.at.most(mps);
    // And the gate costs no throughput beyond the window's: 800 calls in about 800 / 76.8 s.
    expect(made.at(-1)!).to.be.below(800 * (WINDOW_MS / mps) + 100);
  });

  it("keeps a slow channel near its rate: 2/s sends 2 calls per window, never 3 in a second", () => {
    // Calls due every 500 ms (the channel's slots at 2/s), each made as soon as the spacer admits it. With the room
    // taken as a share of the calls (96 % of 2, floored: 1), the channel sent one call a second.
    const s = new SendSpacer();
    const made: number[] = [];
    for (let i = 0; i < 40; i++) {
      let at = Math.max(i * 500, made.at(-1) ?? 0);
      for (let w = s.admit("ch", 2, at); w > 0; w = s.admit("ch", 2, at)) at += w;
      made.push(at);
    }
    // Two calls per window of 1,125 ms (a quarter of an interval of room on so slow a channel): never 3 in a second.
    expect(windowMs(2)).to.equal(1_125);
    for (let j = 2; j < made.length; j++) expect(made[j]! - made[j - 2]!, `call ${j}`).to.be.at.least(1_125);
    // 40 calls in about 40 / 1.78 s, not 40 s.
    expect(made.at(-1)!).to.be.within(21_000, 23_000);
    expect([windowMs(1), windowMs(5), windowMs(6), windowMs(1_000)]).to.deep.equal([1_250, 1_050, WINDOW_MS, WINDOW_MS]);
  });

  it("lets a single send go before the spacing of bulk sends woken before it, still within the window", async () => {
    const s = new SendSpacer();
    // Fifty bulk calls woken together at 1,000/s: the last of them is spaced about 50 ms out.
    const bulk = Array.from({ length: 50 }, () => s.turn("ch", 1_000));
    const order: string[] = [];
    bulk.forEach((p, i) => void p.then(() => order.push(`bulk ${i}`)));
    await s.turn("ch", 1_000, true).then(() => order.push("single"));
    await Promise.all(bulk);
    // The single send went within the first few calls, not after the fifty.
    expect(order.indexOf("single")).to.be.lessThan(5);
  });

  it("gives a single send waiting for room in the window the next room, before template sends", async () => {
    const s = new SendSpacer();
    // The window of a 20/s channel is full (its share, 19 calls, in the last second).
    for (let i = 0; i < windowLimit(20); i++) await s.turn("ch", 20, true);
    const order: string[] = [];
    const bulk = s.turn("ch", 20).then(() => order.push("bulk"));
    const single = s.turn("ch", 20, true).then(() => order.push("single"));
    await Promise.all([bulk, single]);
    expect(order).to.deep.equal(["single", "bulk"]);
  });

  it("lets a call go at once after the channel was idle", () => {
    const s = new SendSpacer();
    expect(s.delay("ch", 20, 0)).to.equal(0);
    expect(s.delay("ch", 20, 5)).to.equal(15);
    expect(s.delay("ch", 20, 1_000)).to.equal(0);
  });
});

/** A throttled template job's provider calls, `throttlePerHour` apart on the clock of the calls (ADR 0017 addendum). */
describe("unit: JobSpacer (a throttled job's provider calls at least its interval apart, however late each send is)", () => {
  /** A fake clock: sleeping advances it, each wake-up `late` ms after asked. */
  function clock(late = 0) {
    let t = 1_000;
    return { now: () => t, sleep: async (ms: number) => void (t += ms + late), advance: (ms: number) => void (t += ms) };
  }

  it("holds each call until the interval and its margin after the previous call, serialized per job", async () => {
    const c = clock(2);
    const s = new JobSpacer(c.now, c.sleep);
    const calls: number[] = [];
    // Five sends of one job arrive together (slots that came late), each taking 30 ms of its own before its call.
    await Promise.all(
      Array.from({ length: 5 }, async () => {
        const turn = await s.turn("job_a", 1_000);
        c.advance(30);
        calls.push(c.now());
        turn.called();
      }),
    );
    const gaps = calls.slice(1).map((t, i) => t - calls[i]);
    for (const g of gaps) expect(g).to.be.at.least(1_000 + jobSpacingMargin(1_000));
    // Another job is not held by the first.
    const other = await s.turn("job_b", 1_000);
    expect(other.waitedMs).to.equal(0);
  });

  it("a send that ended without a call (notCalled) leaves the next one the previous call's spacing", async () => {
    const c = clock();
    const s = new JobSpacer(c.now, c.sleep);
    const first = await s.turn("job", 100);
    first.called();
    const called = c.now();
    const skipped = await s.turn("job", 100);
    const spacing = 100 + jobSpacingMargin(100);
    expect(c.now() - called).to.equal(spacing);
    skipped.notCalled();
    const next = await s.turn("job", 100);
    // Spaced from the call made, not from the skipped turn: no further wait.
    expect(next.waitedMs).to.equal(0);
    expect(jobSpacingMargin(100)).to.equal(5);
    expect(jobSpacingMargin(1_000)).to.equal(20);
    expect(jobSpacingMargin(3_600_000)).to.equal(50);
  });
});
