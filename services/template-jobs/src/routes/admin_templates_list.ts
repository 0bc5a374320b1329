import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { listTemplates } from "../use-cases/templates";

/** GET /admin/v1/organizations/:orgId/templates → {items, nextCursor?}. */
export function adminTemplatesList(router: Router, ctx: TemplateJobsContext): void {
  router.get("/admin/v1/organizations/:orgId/templates", async (req, res) => {
    res.json(await listTemplates(ctx, organizationOf(res), parseQuery(PageQuery, req)));
  });
}
