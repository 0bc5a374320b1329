/**
 * GET /api/v1/analytics (service-spec.md "GET /api/v1/analytics" and
 * "Analytics result"; contract.md section 2, Analytics): the outbound
 * messages whose `createdAt` lies in `[start, end]` (inclusive, at the
 * millisecond), each counted by its current status.
 */
import { z } from "zod";
import { Timestamp } from "./common";
import { DATE_INPUT_MESSAGE, dateInstant } from "./dates";

const AnalyticsDate = (edge: "start" | "end") =>
  z
    .string()
    .refine((v) => dateInstant(v, edge) !== undefined, {
      message: DATE_INPUT_MESSAGE,
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
    const start = dateInstant(q.startDate, "start");
    const end = dateInstant(q.endDate, "end");
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
        .meta({
          description:
            "messages by current status; `sent`, `delivered`, `read`, `failed` always present; `pending` (not accepted by the provider yet, retried) and `cancelled` (a template job's send its cancel stopped before it reached the provider) when there are any",
        }),
      deliveryRate: Rate.meta({ description: "delivered / total (0 when total is 0)" }),
      readRate: Rate.meta({ description: "read / total (0 when total is 0)" }),
      failureRate: Rate.meta({ description: "failed / total (0 when total is 0)" }),
    }),
  })
  .meta({ id: "AnalyticsResult" });
export type AnalyticsResult = z.infer<typeof AnalyticsResult>;
