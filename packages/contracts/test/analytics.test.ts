import { expect } from "chai";
import { AnalyticsQuery } from "../src/analytics";
import { dateInstant as analyticsInstant } from "../src/dates";

describe("analytics dates", () => {
  it("reads a date-only start as 00:00:00.000Z and a date-only end as 23:59:59.999Z (UTC)", () => {
    expect(new Date(analyticsInstant("2024-02-29", "start")!).toISOString()).to.equal("2024-02-29T00:00:00.000Z");
    expect(new Date(analyticsInstant("2024-02-29", "end")!).toISOString()).to.equal("2024-02-29T23:59:59.999Z");
  });

  it("reads full ISO 8601 with Z, an offset (with or without colon) or none (UTC), to the millisecond", () => {
    const at = (v: string) => new Date(analyticsInstant(v, "start")!).toISOString();
    expect(at("2026-01-01T10:00Z")).to.equal("2026-01-01T10:00:00.000Z");
    expect(at("2026-01-01T10:00:00.5Z")).to.equal("2026-01-01T10:00:00.500Z");
    expect(at("2026-01-01T10:00:00.123999Z")).to.equal("2026-01-01T10:00:00.123Z");
    expect(at("2026-01-01T10:00:00+02:00")).to.equal("2026-01-01T08:00:00.000Z");
    expect(at("2026-01-01T10:00:00-0130")).to.equal("2026-01-01T11:30:00.000Z");
    expect(at("2026-01-01T10:00:00")).to.equal("2026-01-01T10:00:00.000Z");
    // An hour-only offset, a comma before the fraction, digits past the nanosecond (all ISO 8601).
    expect(at("2026-01-01T10:00:00+02")).to.equal("2026-01-01T08:00:00.000Z");
    expect(at("2026-01-01T10:00:00,25Z")).to.equal("2026-01-01T10:00:00.250Z");
    expect(at("2026-01-01T10:00:00.1234567891Z")).to.equal("2026-01-01T10:00:00.123Z");
    // Reduced precision (to the hour) and the basic format (date and time both basic).
    expect(at("2026-01-01T10")).to.equal("2026-01-01T10:00:00.000Z");
    expect(at("2026-01-01T10+02:00")).to.equal("2026-01-01T08:00:00.000Z");
    expect(at("20260101T100000Z")).to.equal("2026-01-01T10:00:00.000Z");
    expect(at("20260101T1000-0130")).to.equal("2026-01-01T11:30:00.000Z");
    expect(at("20260101T10")).to.equal("2026-01-01T10:00:00.000Z");
    expect(at("20260101T100000,5+02")).to.equal("2026-01-01T08:00:00.500Z");
  });

  it("reads any year from 0001 to 9999, before 1970 and below 100 too", () => {
    const at = (v: string, edge: "start" | "end" = "start") => new Date(analyticsInstant(v, edge)!).toISOString();
    expect(at("1900-01-01")).to.equal("1900-01-01T00:00:00.000Z");
    expect(at("1969-12-31", "end")).to.equal("1969-12-31T23:59:59.999Z");
    expect(at("0050-03-01T12:00:00Z")).to.equal("0050-03-01T12:00:00.000Z");
    expect(at("0001-01-01")).to.equal("0001-01-01T00:00:00.000Z");
    expect(at("9999-12-31", "end")).to.equal("9999-12-31T23:59:59.999Z");
    expect(at("9999-12-31T23:59:59.999Z")).to.equal("9999-12-31T23:59:59.999Z");
    expect(at("0001-01-01T00:30:00-01:00")).to.equal("0001-01-01T01:30:00.000Z");
  });

  it("refuses an offset that moves the instant out of years 0001 to 9999 in UTC (no four-digit ISO form to answer with)", () => {
    for (const v of ["0001-01-01T00:00:00+01:00", "0001-01-01T00:30+01", "9999-12-31T23:00:00-05:00", "9999-12-31T23:59:59.999-00:01"]) {
      expect(analyticsInstant(v, "start"), v).to.equal(undefined);
      expect(analyticsInstant(v, "end"), v).to.equal(undefined);
    }
  });

  it("refuses impossible or malformed dates", () => {
    for (const v of ["2025-02-29", "2026-04-31", "2026-00-10", "2026-01-01T24:00:00Z", "2026-01-01T10:60Z", "2026-01-01 10:00", "20260101", "", "0000-01-01", "0050-02-29", "2026-01-01T10:00:00+24:00", "2026-01-01T10:00:00+2",
      // Formats mixed or cut short, and basic values out of range.
      "20260101T10:00:00Z", "2026-01-01T1000Z", "2026-01-01T1", "20260101T1", "20260230T100000Z", "20260101T250000Z", "20260101T100000+02:00", "20260101T"]) {
      expect(analyticsInstant(v, "start"), v).to.equal(undefined);
    }
  });

  it("AnalyticsQuery: both required, start not after end (path startDate)", () => {
    expect(AnalyticsQuery.safeParse({ startDate: "2026-01-01", endDate: "2026-01-01" }).success).to.equal(true);
    const reversed = AnalyticsQuery.safeParse({ startDate: "2026-01-02", endDate: "2026-01-01" });
    expect(reversed.success).to.equal(false);
    expect(reversed.error!.issues.map((i) => i.path.join("."))).to.deep.equal(["startDate"]);
    const missing = AnalyticsQuery.safeParse({});
    expect(missing.error!.issues.map((i) => i.path.join(".")).sort()).to.deep.equal(["endDate", "startDate"]);
  });
});
