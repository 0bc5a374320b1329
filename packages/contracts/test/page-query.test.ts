import { expect } from "chai";
import { PageQuery } from "../src";

/** The shared list query of every list endpoint (contacts, conversations, channels, API keys, organizations, webhooks, deliveries, templates, jobs). */
describe("PageQuery limit", () => {
  for (const [raw, limit] of [["1", 1], ["25", 25], ["100", 100], ["05", 5], ["0100", 100]] as const) {
    it(`accepts limit=${JSON.stringify(raw)} as ${limit}`, () => {
      expect(PageQuery.parse({ limit: raw })).to.deep.equal({ limit });
    });
  }

  it("defaults to 25", () => {
    expect(PageQuery.parse({})).to.deep.equal({ limit: 25 });
  });

  // Only a plain decimal integer is a limit: no exponent, hex, sign, fraction, spaces or empty value.
  for (const raw of ["1e2", "0x10", "1.0", "2.5", "+5", "-1", " 5", "5 ", "", "abc", "0", "101", "Infinity", "1_0", "0b11", "١٠"]) {
    it(`refuses limit=${JSON.stringify(raw)} at path limit`, () => {
      const r = PageQuery.safeParse({ limit: raw });
      expect(r.success).to.equal(false);
      expect(r.error!.issues.map((i) => i.path.join("."))).to.deep.equal(["limit"]);
    });
  }
});
