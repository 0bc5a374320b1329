import type { Router } from "express";
import { UpdateTemplateRequest } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { updateTemplateStatus } from "../use-cases/templates";

/** PATCH /admin/v1/organizations/:orgId/templates/:templateId {status} → template (same effects as a provider status update). */
export function adminTemplatesUpdate(router: Router, ctx: TemplateJobsContext): void {
  router.patch("/admin/v1/organizations/:orgId/templates/:templateId", async (req, res) => {
    const body = parseBody(UpdateTemplateRequest, req);
    res.json(await updateTemplateStatus(ctx, organizationOf(res), String(req.params.templateId), body.status));
  });
}
