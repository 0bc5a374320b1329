import { expect } from "chai";
import parsePhoneNumberFromString from "libphonenumber-js";
import metadata from "libphonenumber-js/min/metadata";
import { normalizePhone, PhoneInput } from "../src";

/** The plain reading normalizePhone must keep: the package's default parse (full country detection) and isPossible(). */
function libraryReading(input: string): string | null {
  let s = input.trim().replace(/[\s\-.()]/g, "");
  if (s.startsWith("00")) s = "+" + s.slice(2);
  if (/^\d+$/.test(s)) s = "+" + s;
  if (!/^\+\d{2,17}$/.test(s)) return null;
  const parsed = parsePhoneNumberFromString(s);
  return parsed && parsed.isPossible() ? parsed.number : null;
}

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

  it("answers exactly as the library's full country detection for every calling code and length (it skips the detection only where it cannot matter)", () => {
    let compared = 0;
    let possible = 0;
    for (const cc of Object.keys(metadata.country_calling_codes)) {
      for (let length = 2; length <= 15; length++) {
        for (const lead of ["2", "3", "4", "5", "6", "7", "8", "9", "0", "1"]) {
          for (const form of ["+", "00", ""]) {
            const input = form + cc + (lead + "4155550123456789").slice(0, length);
            const expected = libraryReading(input);
            expect(normalizePhone(input), input).to.equal(expected);
            compared++;
            if (expected !== null) possible++;
          }
        }
      }
    }
    expect(compared).to.be.greaterThan(50_000);
    expect(possible).to.be.greaterThan(5_000);
  });

  it("keeps the lengths only some countries of a calling code allow (7-digit +1: Canada; +44 lengths of GB, not of Jersey)", () => {
    for (const input of ["+1 204 5550", "+1 4165550", "+14155550", "+44 7700 900", "+44 1534 123456", "+7 912 345 67 89", "+61 8 9162 1234"]) {
      expect(normalizePhone(input), input).to.equal(libraryReading(input));
    }
  });

  it("validates API phone fields: 3 to 32 characters and normalizable", () => {
    expect(PhoneInput.safeParse("+15550001111").success).to.equal(true);
    expect(PhoneInput.safeParse("12").success).to.equal(false);
    expect(PhoneInput.safeParse("1".repeat(33)).success).to.equal(false);
    expect(PhoneInput.safeParse("hello").success).to.equal(false);
  });
});
