import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { listTemplates } from "../use-cases/templates";

/** GET /api/v1/templates: cursor pagination like every list. */
export function v1TemplatesList(router: Router, ctx: TemplateJobsContext): void {
  router.get("/api/v1/templates", async (req, res) => {
    res.json(await listTemplates(ctx, organizationOf(res), parseQuery(PageQuery, req)));
  });
}
