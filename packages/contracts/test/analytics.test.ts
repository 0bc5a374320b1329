import { expect } from "chai";
import { AnalyticsQuery, analyticsInstant } from "../src/analytics";

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
  });

  it("refuses impossible or malformed dates", () => {
    for (const v of ["2025-02-29", "2026-04-31", "2026-00-10", "2026-01-01T24:00:00Z", "2026-01-01T10:60Z", "2026-01-01 10:00", "20260101", "", "1969-12-31"]) {
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
