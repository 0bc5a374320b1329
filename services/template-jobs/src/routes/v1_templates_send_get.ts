import type { Router } from "express";
import { organizationOf } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { getJob } from "../use-cases/jobs";

/** GET /api/v1/templates/send/:jobId → the job with its progress. */
export function v1TemplatesSendGet(router: Router, ctx: TemplateJobsContext): void {
  router.get("/api/v1/templates/send/:jobId", async (req, res) => {
    res.json(await getJob(ctx, organizationOf(res), String(req.params.jobId)));
  });
}
