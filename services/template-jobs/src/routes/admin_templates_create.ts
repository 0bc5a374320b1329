import type { Router } from "express";
import { CreateTemplateRequest } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { createTemplate } from "../use-cases/templates";

/** POST /admin/v1/organizations/:orgId/templates → 201 template. */
export function adminTemplatesCreate(router: Router, ctx: TemplateJobsContext): void {
  router.post("/admin/v1/organizations/:orgId/templates", async (req, res) => {
    res.status(201).json(await createTemplate(ctx, organizationOf(res), parseBody(CreateTemplateRequest, req)));
  });
}
