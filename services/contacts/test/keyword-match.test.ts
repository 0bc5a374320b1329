import { expect } from "chai";
import { DEFAULT_OPT_OUT_KEYWORDS } from "@platform/contracts";
import { matchOptOutKeyword } from "../src/use-cases/keyword-opt-out";

describe("matchOptOutKeyword (unit)", () => {
  it("matches every default keyword, whole text, case-insensitively, trimmed", () => {
    for (const k of DEFAULT_OPT_OUT_KEYWORDS) {
      expect(matchOptOutKeyword(k, DEFAULT_OPT_OUT_KEYWORDS)).to.equal(k);
      expect(matchOptOutKeyword(k.toLowerCase(), DEFAULT_OPT_OUT_KEYWORDS)).to.equal(k);
      expect(matchOptOutKeyword(`  ${k[0]}${k.slice(1).toLowerCase()}\n\t`, DEFAULT_OPT_OUT_KEYWORDS)).to.equal(k);
    }
  });

  it("never matches a sentence that contains a keyword", () => {
    for (const text of ["Please STOP sending me messages", "stop it", "STOP!", "STOP.", "I want to unsubscribe", "end of story", "STOP STOP"]) {
      expect(matchOptOutKeyword(text, DEFAULT_OPT_OUT_KEYWORDS), text).to.equal(null);
    }
  });

  it("is sensitive to spelling", () => {
    for (const text of ["STOPP", "SOTP", "STAHP", "UNSUBSCRIBBE", "OPT OUT", "OPT-OUT", "STOP ALL", "QUITT", "ENDD", "5TOP"]) {
      expect(matchOptOutKeyword(text, DEFAULT_OPT_OUT_KEYWORDS), text).to.equal(null);
    }
  });

  it("uses the organization's own list", () => {
    expect(matchOptOutKeyword("alto", ["ALTO", "BAJA"])).to.equal("ALTO");
    expect(matchOptOutKeyword("STOP", ["ALTO", "BAJA"])).to.equal(null);
    expect(matchOptOutKeyword("STOP", [])).to.equal(null);
  });

  it("matches keywords outside ASCII case-insensitively, accents as spelt", () => {
    const keywords = ["STRAẞE", "ΣΤΟΠ", "ARRÊT"];
    expect(matchOptOutKeyword("straße", keywords)).to.equal("STRAẞE");
    expect(matchOptOutKeyword("στοπ", keywords)).to.equal("ΣΤΟΠ");
    expect(matchOptOutKeyword("arre\u0302t", keywords)).to.equal("ARRÊT");
    expect(matchOptOutKeyword("arret", keywords)).to.equal(null);
    // Another spelling, not another case.
    expect(matchOptOutKeyword("Strasse", keywords)).to.equal(null);
  });

  it("never takes a letter that only upper-cases to a keyword's for it (dotless i, long s, ligatures, full width)", () => {
    for (const text of ["quıt", "ſtop", "ﬆop", "ＳＴＯＰ", "ѕтоп"]) {
      expect(matchOptOutKeyword(text, DEFAULT_OPT_OUT_KEYWORDS), text).to.equal(null);
    }
  });

  it("never matches empty or blank text", () => {
    expect(matchOptOutKeyword("", DEFAULT_OPT_OUT_KEYWORDS)).to.equal(null);
    expect(matchOptOutKeyword("   ", DEFAULT_OPT_OUT_KEYWORDS)).to.equal(null);
  });
});
