import type { Router } from "express";
import { AnalyticsQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { AnalyticsContext } from "../use-cases/context";
import { queryAnalytics } from "../use-cases/query-analytics";

/** GET /api/v1/analytics?startDate&endDate → Analytics result (every plan may read it). */
export function v1AnalyticsGet(router: Router, ctx: AnalyticsContext): void {
  router.get("/api/v1/analytics", async (req, res) => {
    const organizationId = organizationOf(res);
    const query = parseQuery(AnalyticsQuery, req);
    res.json(await queryAnalytics(ctx.db, organizationId, query));
  });
}
