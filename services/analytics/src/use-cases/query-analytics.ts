import { ANALYTICS_STATUSES, dateInstant, type AnalyticsQuery, type AnalyticsResult } from "@platform/contracts";
import type { Queryable } from "./apply-statuses";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A half-open interval [from, to) in epoch milliseconds. */
export interface Span {
  from: number;
  to: number;
}

/** What one query reads: the partial hours from the message rows, the rest from hour, day and month buckets. */
export interface QueryPlan {
  rows: Span[];
  buckets: Array<Span & { granularity: "h" | "d" | "m" }>;
}

const floorTo = (ms: number, unit: number) => Math.floor(ms / unit) * unit;
const ceilTo = (ms: number, unit: number) => Math.ceil(ms / unit) * unit;
/** 00:00:00.000Z of the first of a month (`month` 0-based, rolling over; years below 100 taken as they are). */
const monthStart = (year: number, month: number) => {
  const d = new Date(0);
  d.setUTCFullYear(year, month, 1);
  return d.getTime();
};
const monthFloor = (ms: number) => {
  const d = new Date(ms);
  return monthStart(d.getUTCFullYear(), d.getUTCMonth());
};
const monthCeil = (ms: number) => {
  const f = monthFloor(ms);
  if (f === ms) return ms;
  const d = new Date(ms);
  return monthStart(d.getUTCFullYear(), d.getUTCMonth() + 1);
};

/**
 * Splits [from, to) into the fewest pieces: the partial hours at both edges
 * (read exactly from the message rows), then, inside the whole hours, whole
 * months, whole days around them and whole hours around those. A year reads
 * at most 2 partial hours, 46 hour, 60 day and 12 month buckets per status;
 * a day reads up to 24 hour buckets: about the same cost.
 */
export function planQuery(from: number, to: number): QueryPlan {
  const plan: QueryPlan = { rows: [], buckets: [] };
  const h0 = ceilTo(from, HOUR);
  const h1 = floorTo(to, HOUR);
  if (h0 >= h1) {
    if (from < to) plan.rows.push({ from, to });
    return plan;
  }
  if (from < h0) plan.rows.push({ from, to: h0 });
  if (h1 < to) plan.rows.push({ from: h1, to });
  const d0 = ceilTo(h0, DAY);
  const d1 = floorTo(h1, DAY);
  if (d0 >= d1) {
    plan.buckets.push({ granularity: "h", from: h0, to: h1 });
    return plan;
  }
  if (h0 < d0) plan.buckets.push({ granularity: "h", from: h0, to: d0 });
  if (d1 < h1) plan.buckets.push({ granularity: "h", from: d1, to: h1 });
  const m0 = monthCeil(d0);
  const m1 = monthFloor(d1);
  if (m0 >= m1) {
    plan.buckets.push({ granularity: "d", from: d0, to: d1 });
    return plan;
  }
  if (d0 < m0) plan.buckets.push({ granularity: "d", from: d0, to: m0 });
  if (m1 < d1) plan.buckets.push({ granularity: "d", from: m1, to: d1 });
  plan.buckets.push({ granularity: "m", from: m0, to: m1 });
  return plan;
}

/**
 * An instant as Postgres reads it. The exclusive end of a range ending 9999-12-31T23:59:59.999Z is in year 10000, which
 * JavaScript writes in its expanded form (`+010000-…`) and Postgres refuses; Postgres reads `10000-01-01T…Z`.
 */
const iso = (ms: number) => {
  const s = new Date(ms).toISOString();
  return s.startsWith("+") ? s.slice(1).replace(/^0+/, "") : s;
};

/** Counts by status over a plan, in one SQL statement. */
export async function countByStatus(db: Queryable, organizationId: string, plan: QueryPlan): Promise<Map<string, number>> {
  const params: unknown[] = [organizationId];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const parts = [
    ...plan.rows.map(
      (s) =>
        `SELECT status, count(*) AS n FROM analytics.messages WHERE organization_id = $1 AND created_at >= ${p(iso(s.from))}::timestamptz AND created_at < ${p(iso(s.to))}::timestamptz GROUP BY status`,
    ),
    ...plan.buckets.map(
      (b) =>
        `SELECT status, sum(count) AS n FROM analytics.buckets WHERE organization_id = $1 AND granularity = '${b.granularity}' AND bucket_start >= ${p(iso(b.from))}::timestamptz AND bucket_start < ${p(iso(b.to))}::timestamptz GROUP BY status`,
    ),
  ];
  const counts = new Map<string, number>();
  if (parts.length === 0) return counts;
  const rows: Array<{ status: string; n: string }> = await db.query(
    `SELECT status, sum(n)::bigint AS n FROM (${parts.join(" UNION ALL ")}) AS x GROUP BY status`,
    params,
  );
  for (const r of rows) counts.set(r.status, Number(r.n));
  return counts;
}

/** GET /api/v1/analytics: the outbound messages created in [startDate, endDate] (inclusive, ms), by current status. */
export async function queryAnalytics(db: Queryable, organizationId: string, query: AnalyticsQuery): Promise<AnalyticsResult> {
  const start = dateInstant(query.startDate, "start")!;
  const end = dateInstant(query.endDate, "end")!;
  const counts = await countByStatus(db, organizationId, planQuery(start, end + 1));
  const out: Record<string, number> = {};
  for (const s of ANALYTICS_STATUSES) out[s] = 0;
  for (const [status, n] of counts) if (n !== 0 || status in out) out[status] = n;
  const total = Object.values(out).reduce((a, b) => a + b, 0);
  const rate = (n: number) => (total === 0 ? 0 : n / total);
  return {
    period: { start: new Date(start).toISOString(), end: new Date(end).toISOString() },
    outboundMessages: {
      total,
      counts: out as AnalyticsResult["outboundMessages"]["counts"],
      deliveryRate: rate(out.delivered!),
      readRate: rate(out.read!),
      failureRate: rate(out.failed!),
    },
  };
}
