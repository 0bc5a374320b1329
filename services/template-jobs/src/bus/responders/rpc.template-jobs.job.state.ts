import { TEMPLATE_JOBS_RPC } from "@platform/contracts";
import type { TemplateJobsContext } from "../../context";
import { jobState } from "../../use-cases/jobs";

/** `rpc.template-jobs.job.state.v1`: a job's status and throttle interval (asked by messaging before it retries one of its sends). */
export function serveJobState(ctx: TemplateJobsContext): void {
  ctx.bus.serve(TEMPLATE_JOBS_RPC.jobState, (req) => jobState(ctx, req.organizationId, req.jobId));
}
