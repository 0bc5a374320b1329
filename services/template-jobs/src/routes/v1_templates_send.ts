import type { Router } from "express";
import { IdempotencyKey, TemplateSendJobRequest } from "@platform/contracts";
import { organizationOf, parseBody, parseValue, refusePlanRefused } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { withIdempotency } from "../use-cases/idempotency";
import { createJob } from "../use-cases/jobs";
import { readSendRequest } from "../use-cases/send-request";

/** POST /api/v1/templates/send (optional `Idempotency-Key`; bodies up to 16 MB) → 200 job. */
export function v1TemplatesSend(router: Router, ctx: TemplateJobsContext): void {
  router.post("/api/v1/templates/send", async (req, res) => {
    const organizationId = organizationOf(res);
    const rawKey = req.header("idempotency-key");
    const key = rawKey === undefined ? undefined : parseValue(IdempotencyKey, rawKey, "headers.Idempotency-Key");
    const answer = await withIdempotency(ctx, organizationId, key, req.body ?? null, async (completeWith) => {
      refusePlanRefused(req.headers);
      const job = await createJob(ctx, organizationId, parseBody(TemplateSendJobRequest, req, readSendRequest), completeWith && ((q, job) => completeWith(q, { status: 200, body: job })));
      return { status: 200, body: job };
    });
    if (answer.replayed) res.setHeader("Idempotent-Replayed", "true");
    res.status(answer.status).json(answer.body);
  });
}
