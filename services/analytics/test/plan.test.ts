import { expect } from "chai";
import { planQuery } from "../src/use-cases/query-analytics";

const T = (s: string) => Date.parse(s);

describe("analytics: query plan", () => {
  // Before 1970 and below year 100 too (date inputs run from 0001): months must start on the 1st there as well.
  for (const base of ["2025-01-01", "1900-01-01", "0050-01-01"])
  it(`tiles [from, to) exactly with aligned pieces, from ${base} on`, () => {
    let seed = 3;
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let k = 0; k < 1_000; k++) {
      const from = T(`${base}T00:00:00.000Z`) + Math.floor(rnd() * 400 * 86_400_000);
      const to = from + 1 + Math.floor(rnd() * (k % 2 ? 5 * 3_600_000 : 500 * 86_400_000));
      const plan = planQuery(from, to);
      const pieces = [...plan.rows, ...plan.buckets].sort((a, b) => a.from - b.from);
      let at = from;
      for (const p of pieces) {
        expect(p.from).to.equal(at);
        expect(p.to).to.be.greaterThan(p.from);
        at = p.to;
      }
      expect(at).to.equal(to);
      for (const b of plan.buckets) {
        const unit = b.granularity === "h" ? 3_600_000 : 86_400_000;
        expect(b.from % unit).to.equal(0);
        expect(b.to % unit).to.equal(0);
        if (b.granularity === "m") expect([new Date(b.from).getUTCDate(), new Date(b.to).getUTCDate()]).to.deep.equal([1, 1]);
      }
      expect(plan.rows.length).to.be.at.most(2);
      expect(plan.buckets.length).to.be.at.most(5);
    }
  });

  it("a year reads two partial hours and a handful of bucket ranges", () => {
    const plan = planQuery(T("2025-01-01T00:30:00.000Z"), T("2025-12-31T23:30:00.000Z") + 1);
    expect(plan.rows).to.have.length(2);
    expect(plan.buckets.map((b) => b.granularity).sort()).to.deep.equal(["d", "d", "h", "h", "m"]);
  });
});
