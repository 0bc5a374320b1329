/**
 * GET /api/v1/analytics (service-spec.md "GET /api/v1/analytics" and
 * "Analytics result"; contract.md section 2, Analytics): the outbound
 * messages whose `createdAt` lies in `[start, end]` (inclusive, at the
 * millisecond), each counted by its current status.
 */
import { z } from "zod";
import { Timestamp } from "./common";

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * The instant an analytics date stands for, in milliseconds since the epoch,
 * or undefined when it is not a real date. A date-only start is
 * 00:00:00.000Z of that day, a date-only end 23:59:59.999Z (UTC). A full
 * ISO 8601 date-time without an offset is read as UTC; digits past the
 * millisecond are dropped (the API's precision is the millisecond).
 */
export function analyticsInstant(value: string, edge: "start" | "end"): number | undefined {
  const d = DATE_ONLY.exec(value);
  if (d) {
    const ms = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]));
    if (!sameDay(ms, Number(d[1]), Number(d[2]), Number(d[3]))) return undefined;
    return edge === "start" ? ms : ms + 86_400_000 - 1;
  }
  const t = DATE_TIME.exec(value);
  if (!t) return undefined;
  const [, y, mo, da, h, mi, s = "0", frac = "", zone = "Z"] = t;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return undefined;
  const local = Date.UTC(Number(y), Number(mo) - 1, Number(da), Number(h), Number(mi), Number(s), Number(frac.padEnd(3, "0").slice(0, 3)));
  if (!sameDay(local, Number(y), Number(mo), Number(da))) return undefined;
  let offsetMin = 0;
  if (zone.toUpperCase() !== "Z") {
    const m = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    if (Number(m[2]) > 23 || Number(m[3]) > 59) return undefined;
    offsetMin = (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3]));
  }
  return local - offsetMin * 60_000;
}

function sameDay(ms: number, y: number, m: number, d: number): boolean {
  const date = new Date(ms);
  return !Number.isNaN(ms) && date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d && y >= 1970 && y <= 9999;
}

const AnalyticsDate = (edge: "start" | "end") =>
  z
    .string()
    .refine((v) => analyticsInstant(v, edge) !== undefined, {
      message: "must be a date (YYYY-MM-DD) or an ISO 8601 date-time (YYYY-MM-DDTHH:mm:ss.sssZ)",
    })
    .meta({
      description:
        edge === "start"
          ? "date-only (00:00:00.000Z of that day, UTC) or full ISO 8601 (UTC when no offset is given)"
          : "date-only (23:59:59.999Z of that day, UTC) or full ISO 8601 (UTC when no offset is given); inclusive",
      example: edge === "start" ? "2026-01-01" : "2026-01-31T23:59:59.999Z",
    });

/** Query of GET /api/v1/analytics: both required; `startDate` after `endDate` is a validation error. */
export const AnalyticsQuery = z
  .object({ startDate: AnalyticsDate("start"), endDate: AnalyticsDate("end") })
  .superRefine((q, ctx) => {
    const start = analyticsInstant(q.startDate, "start");
    const end = analyticsInstant(q.endDate, "end");
    if (start !== undefined && end !== undefined && start > end) {
      ctx.addIssue({ code: "custom", path: ["startDate"], message: "must not be after endDate" });
    }
  })
  .meta({ id: "AnalyticsQuery" });
export type AnalyticsQuery = z.infer<typeof AnalyticsQuery>;

/** Outbound statuses always present in `counts` (zero-filled). */
export const ANALYTICS_STATUSES = ["sent", "delivered", "read", "failed"] as const;

const Count = z.number().int().min(0);
const Rate = z.number().min(0).max(1);

export const AnalyticsResult = z
  .object({
    period: z.object({
      start: Timestamp.meta({ description: "start of the analyzed period (inclusive)" }),
      end: Timestamp.meta({ description: "end of the analyzed period (inclusive, to the millisecond)" }),
    }),
    outboundMessages: z.object({
      total: Count.meta({ description: "outbound messages (text and template) created in the period" }),
      counts: z
        .object({ sent: Count, delivered: Count, read: Count, failed: Count })
        .catchall(Count)
        .meta({ description: "messages by current status; `sent`, `delivered`, `read`, `failed` always present" }),
      deliveryRate: Rate.meta({ description: "delivered / total (0 when total is 0)" }),
      readRate: Rate.meta({ description: "read / total (0 when total is 0)" }),
      failureRate: Rate.meta({ description: "failed / total (0 when total is 0)" }),
    }),
  })
  .meta({ id: "AnalyticsResult" });
export type AnalyticsResult = z.infer<typeof AnalyticsResult>;
