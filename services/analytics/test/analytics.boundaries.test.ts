import { expect } from "chai";
import { eventually } from "@platform/testing";
import { analytics, counts, newMessageId, newOrg, publish, settle, statusEvent } from "./harness";

/** Brute force over the messages a test published: what the answer must be. */
function expectedCounts(messages: Array<{ at: number; status: string }>, from: number, to: number) {
  const out: Record<string, number> = { sent: 0, delivered: 0, read: 0, failed: 0 };
  for (const m of messages) if (m.at >= from && m.at <= to) out[m.status] = (out[m.status] ?? 0) + 1;
  return out;
}

describe("analytics: range boundaries to the millisecond", () => {
  const org = newOrg();
  const T = (s: string) => Date.parse(s);
  const statuses = ["sent", "delivered", "read", "failed"] as const;
  const messages: Array<{ at: number; status: string }> = [];

  before(async function () {
    this.timeout(60_000);
    const fixed = [
      "2026-05-09T23:59:59.999Z",
      "2026-05-10T00:00:00.000Z",
      "2026-05-10T09:59:59.999Z",
      "2026-05-10T10:00:00.000Z",
      "2026-05-10T10:00:00.001Z",
      "2026-05-10T12:30:00.000Z",
      "2026-05-10T13:59:59.999Z",
      "2026-05-10T14:00:00.000Z",
      "2026-05-10T23:59:59.999Z",
      "2026-05-11T00:00:00.000Z",
      "2026-05-31T23:59:59.999Z",
      "2026-06-01T00:00:00.000Z",
    ].map(T);
    // And 300 at pseudo-random milliseconds over April to June (deterministic).
    let seed = 42;
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const spread = Array.from({ length: 300 }, () => T("2026-04-01T00:00:00.000Z") + Math.floor(rnd() * 91 * 86_400_000));
    const events = [];
    for (const [i, at] of [...fixed, ...spread].entries()) {
      const status = statuses[i % 4]!;
      messages.push({ at, status });
      events.push(statusEvent(org, newMessageId(), new Date(at).toISOString(), status));
    }
    await publish(events);
    await eventually(async () => (await analytics(org, "2026-01-01", "2026-12-31")).outboundMessages.total === messages.length, 30_000);
    await settle();
  });

  const cases: Array<[string, string]> = [
    ["2026-05-10T10:00:00.000Z", "2026-05-10T13:59:59.999Z"],
    ["2026-05-10T09:59:59.999Z", "2026-05-10T14:00:00.000Z"],
    ["2026-05-10T10:00:00.001Z", "2026-05-10T13:59:59.998Z"],
    ["2026-05-10T10:00:00.000Z", "2026-05-10T10:00:00.000Z"],
    ["2026-05-10T09:59:59.999Z", "2026-05-10T10:00:00.000Z"],
    ["2026-05-10T00:00:00.000Z", "2026-05-10T23:59:59.999Z"],
    ["2026-05-09T23:59:59.999Z", "2026-05-11T00:00:00.000Z"],
    ["2026-05-10T00:00:00.001Z", "2026-05-31T23:59:59.998Z"],
    ["2026-04-01T00:00:00.000Z", "2026-06-30T23:59:59.999Z"],
    ["2026-04-15T07:12:13.456Z", "2026-06-20T19:00:00.000Z"],
    ["2026-03-31T23:00:00.000Z", "2026-07-01T01:00:00.000Z"],
  ];
  for (const [s, e] of cases) {
    it(`[${s}, ${e}] counts exactly the messages created in it`, async () => {
      const body = await analytics(org, s, e);
      expect(counts(body)).to.deep.equal(expectedCounts(messages, T(s), T(e)));
      expect(body.period).to.deep.equal({ start: s, end: e });
    });
  }

  it("a date-only end is the end of that day (UTC), a date-only start its beginning", async () => {
    expect(counts(await analytics(org, "2026-05-10", "2026-05-10"))).to.deep.equal(
      expectedCounts(messages, T("2026-05-10T00:00:00.000Z"), T("2026-05-10T23:59:59.999Z")),
    );
    expect(counts(await analytics(org, "2026-05-10", "2026-05-31"))).to.deep.equal(
      expectedCounts(messages, T("2026-05-10T00:00:00.000Z"), T("2026-05-31T23:59:59.999Z")),
    );
  });

  it("60 pseudo-random ranges at millisecond precision agree with a brute-force count", async () => {
    let seed = 9;
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const lo = T("2026-03-25T00:00:00.000Z");
    const span = 105 * 86_400_000;
    for (let k = 0; k < 60; k++) {
      const a = lo + Math.floor(rnd() * span);
      const b = a + Math.floor(rnd() * (k % 3 === 0 ? 3 * 3_600_000 : span / 2));
      const body = await analytics(org, new Date(a).toISOString(), new Date(b).toISOString());
      expect(counts(body), `[${new Date(a).toISOString()}, ${new Date(b).toISOString()}]`).to.deep.equal(expectedCounts(messages, a, b));
    }
  });
});
