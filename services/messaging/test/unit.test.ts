import { expect } from "chai";
import { retryDelayMs } from "../src/use-cases/deliver";
import { requestHash } from "../src/use-cases/idempotency";
import { transitions } from "../src/use-cases/process-provider-batch";

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

describe("unit: status transitions named for a batch (the SQL decides, the replay names the steps)", () => {
  it("forward only, final states final, pending jumping ahead gets its sent; falls back to the database's state", () => {
    expect(transitions("sent", ["delivered", "read"], "read")).to.deep.equal(["delivered", "read"]);
    // A read that comes first implies the delivery: delivered, then read; the late delivered adds nothing.
    expect(transitions("sent", ["read", "delivered"], "read")).to.deep.equal(["delivered", "read"]);
    expect(transitions("sent", ["read"], "read")).to.deep.equal(["delivered", "read"]);
    expect(transitions("pending", ["read"], "read")).to.deep.equal(["sent", "delivered", "read"]);
    expect(transitions("delivered", ["read"], "read")).to.deep.equal(["read"]);
    expect(transitions("read", ["delivered"], "read")).to.deep.equal([]);
    expect(transitions("pending", ["delivered"], "delivered")).to.deep.equal(["sent", "delivered"]);
    expect(transitions("pending", ["failed"], "failed")).to.deep.equal(["sent", "failed"]);
    expect(transitions("delivered", ["sent", "deleted", "failed", "read"], "failed")).to.deep.equal(["failed"]);
    expect(transitions("sent", ["sent", "sent", "delivered", "delivered"], "delivered")).to.deep.equal(["delivered"]);
    expect(transitions("pending", [], "read")).to.deep.equal(["sent", "delivered", "read"]);
  });
});
