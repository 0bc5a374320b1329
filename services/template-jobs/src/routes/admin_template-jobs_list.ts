import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { listJobs } from "../use-cases/jobs";

/**
 * GET /admin/v1/organizations/:orgId/template-jobs?limit&cursor → {items: jobs with progress, nextCursor?}, newest
 * first. The console's job list (issue 15); kept off /api/v1, whose operations are the spec's.
 */
export function adminTemplateJobsList(router: Router, ctx: TemplateJobsContext): void {
  router.get("/admin/v1/organizations/:orgId/template-jobs", async (req, res) => {
    res.json(await listJobs(ctx, organizationOf(res), parseQuery(PageQuery, req)));
  });
}
