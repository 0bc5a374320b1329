import type { Router } from "express";
import { organizationOf } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { cancelJob } from "../use-cases/jobs";

/** POST /api/v1/templates/send/:jobId/cancel → the job (`cancelled`, or unchanged when already final). */
export function v1TemplatesSendCancel(router: Router, ctx: TemplateJobsContext): void {
  router.post("/api/v1/templates/send/:jobId/cancel", async (req, res) => {
    res.json(await cancelJob(ctx, organizationOf(res), String(req.params.jobId)));
  });
}
