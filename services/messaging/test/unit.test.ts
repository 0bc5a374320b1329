import { expect } from "chai";
import { retryDelayMs } from "../src/use-cases/deliver";
import { requestHash } from "../src/use-cases/idempotency";

describe("unit: retry backoff and request hashing", () => {
  it("backs off from 1 s, doubling, capped at 60 s", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 50].map(retryDelayMs)).to.deep.equal([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  });

  it("hashes JSON bodies independently of key order, but not of values", () => {
    expect(requestHash({ a: 1, b: { c: [1, 2], d: "x" } })).to.equal(requestHash({ b: { d: "x", c: [1, 2] }, a: 1 }));
    expect(requestHash({ a: 1 })).to.not.equal(requestHash({ a: 2 }));
    expect(requestHash({ a: [1, 2] })).to.not.equal(requestHash({ a: [2, 1] }));
    expect(requestHash(null)).to.equal(requestHash(null));
  });
});
