import { expect } from "chai";
import { SendSpacer } from "../src/use-cases/pacing";

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

  it("lets a call go at once after the channel was idle", () => {
    const s = new SendSpacer();
    expect(s.delay("ch", 20, 0)).to.equal(0);
    expect(s.delay("ch", 20, 5)).to.equal(15);
    expect(s.delay("ch", 20, 1_000)).to.equal(0);
  });
});
