import { expect } from "chai";
import { normalizePhone, PhoneInput } from "../src";

describe("normalizePhone", () => {
  const variants = ["+15550001111", "15550001111", "+1 555 000 1111", "+1-555-000-1111", "+1 (555) 000.1111", "0015550001111", " +15550001111 "];
  for (const v of variants) {
    it(`reads ${JSON.stringify(v)} as +15550001111`, () => {
      expect(normalizePhone(v)).to.equal("+15550001111");
    });
  }

  it("keeps other countries' numbers", () => {
    expect(normalizePhone("+44 20 7946 0958")).to.equal("+442079460958");
    expect(normalizePhone("5511987654321")).to.equal("+5511987654321");
  });

  it("accepts a possible number even where metadata knows no range", () => {
    expect(normalizePhone("+15550001111")).to.equal("+15550001111");
  });

  for (const bad of ["", "abc", "+", "12", "+1 555 CALL NOW", "++15550001111", "+1555000111122223333", "555-0001"]) {
    it(`refuses ${JSON.stringify(bad)}`, () => {
      expect(normalizePhone(bad)).to.equal(null);
    });
  }

  it("validates API phone fields: 3 to 32 characters and normalizable", () => {
    expect(PhoneInput.safeParse("+15550001111").success).to.equal(true);
    expect(PhoneInput.safeParse("12").success).to.equal(false);
    expect(PhoneInput.safeParse("1".repeat(33)).success).to.equal(false);
    expect(PhoneInput.safeParse("hello").success).to.equal(false);
  });
});
