import { expect } from "chai";
import { api, newOrg } from "./harness";

async function expect400(qs: string, path: string) {
  const res = await api(newOrg()).get(`/api/v1/analytics${qs}`);
  expect(res.status, qs).to.equal(400);
  expect(res.body.error.code).to.equal("VALIDATION_ERROR");
  expect(res.body.error.details.map((d: any) => d.path), qs).to.include(path);
}

describe("analytics: invalid queries", () => {
  it("missing dates are 400 VALIDATION_ERROR naming the parameter", async () => {
    await expect400("", "query.startDate");
    await expect400("", "query.endDate");
    await expect400("?startDate=2026-01-01", "query.endDate");
    await expect400("?endDate=2026-01-01", "query.startDate");
  });

  it("malformed dates are 400", async () => {
    for (const bad of ["2026-13-01", "2026-02-30", "2026-1-1", "yesterday", "", "2026-01-01T25:00:00Z", "2026-01-01T10:00:00+25:00", "1700000000000"]) {
      await expect400(`?startDate=${encodeURIComponent(bad)}&endDate=2026-12-31`, "query.startDate");
      await expect400(`?startDate=2026-01-01&endDate=${encodeURIComponent(bad)}`, "query.endDate");
    }
  });

  it("startDate after endDate is 400; equal instants are a valid one-millisecond range", async () => {
    await expect400("?startDate=2026-02-02&endDate=2026-02-01", "query.startDate");
    await expect400("?startDate=2026-02-01T00:00:00.001Z&endDate=2026-02-01T00:00:00.000Z", "query.startDate");
    const ok = await api(newOrg()).get("/api/v1/analytics?startDate=2026-02-01T00:00:00.000Z&endDate=2026-02-01T00:00:00.000Z");
    expect(ok.status).to.equal(200);
    // A date-only end the same day as a date-time start is the end of that day.
    const sameDay = await api(newOrg()).get("/api/v1/analytics?startDate=2026-02-01T12:00:00Z&endDate=2026-02-01");
    expect(sameDay.status).to.equal(200);
    expect(sameDay.body.period.end).to.equal("2026-02-01T23:59:59.999Z");
  });

  it("the last and first instants of years 0001 to 9999 are valid edges (200, no 500); an offset that leaves those years is 400", async () => {
    for (const qs of [
      "?startDate=0001-01-01&endDate=9999-12-31",
      "?startDate=9999-12-31&endDate=9999-12-31",
      "?startDate=2026-01-01&endDate=9999-12-31T23:59:59.999Z",
      "?startDate=0001-01-01T00:30:00-01:00&endDate=2026-01-01",
    ]) {
      const res = await api(newOrg()).get(`/api/v1/analytics${qs}`);
      expect(res.status, qs).to.equal(200);
    }
    const all = await api(newOrg()).get("/api/v1/analytics?startDate=0001-01-01&endDate=9999-12-31");
    expect(all.body.period).to.deep.equal({ start: "0001-01-01T00:00:00.000Z", end: "9999-12-31T23:59:59.999Z" });
    await expect400(`?startDate=${encodeURIComponent("0001-01-01T00:00:00+01:00")}&endDate=2026-01-01`, "query.startDate");
    await expect400(`?startDate=2026-01-01&endDate=${encodeURIComponent("9999-12-31T23:59:59-05:00")}`, "query.endDate");
  });

  it("repeated parameters are refused", async () => {
    await expect400("?startDate=2026-01-01&startDate=2026-01-02&endDate=2026-02-01", "query.startDate");
  });
});
