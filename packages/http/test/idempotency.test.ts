import { createHash } from "node:crypto";
import { expect } from "chai";
import { requestHash } from "../src";

/** The canonical text as it was built whole before the hash was streamed: stored keys' hashes must still match. */
function canonicalWhole(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalWhole).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalWhole((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe("requestHash (Idempotency-Key bodies)", () => {
  it("is the hash of the body's canonical JSON, whatever its key order, as before it was streamed", () => {
    const body = { to: "+15550001111", text: "héllo \"quoted\" \u2028", n: 1.5, ok: true, none: null, list: [{ b: 2, a: [1, "x", { z: 0, y: [] }] }] };
    const reordered = { list: [{ a: [1, "x", { y: [], z: 0 }], b: 2 }], none: null, ok: true, n: 1.5, text: body.text, to: body.to };
    expect(requestHash(body)).to.equal(sha256(canonicalWhole(body)));
    expect(requestHash(reordered)).to.equal(requestHash(body));
    expect(requestHash({ ...body, text: "other" })).to.not.equal(requestHash(body));
    for (const v of [null, 0, "s", [], {}, [[]], { a: undefined }]) expect(requestHash(v), JSON.stringify(v)).to.equal(sha256(canonicalWhole(v)));
  });

  it("hashes a body far over one chunk the same way (a 50,000-recipient bulk send)", () => {
    const recipients = Array.from({ length: 50_000 }, (_, i) => ({ phone: `+1415${3_000_000 + i}`, bodyParameters: Array.from({ length: 20 }, (_, p) => `v${p}-${i}`) }));
    const body = { templateId: "tpl_1", messagingChannelId: "ch_1", recipients };
    expect(requestHash(body)).to.equal(sha256(canonicalWhole(body)));
  });
});
