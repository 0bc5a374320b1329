import { outboxRequestIdMigration, outboxTraceMigration } from "@platform/bus";
import type { ServiceDefinition } from "@platform/service";
import { consumeMessageFinalEvents } from "./bus/consumers/evt.message.final.consumer";
import { consumeProviderInbound } from "./bus/consumers/provider.inbound.consumer";
import { consumeOrganizationUpserted } from "./bus/consumers/sys.organization.upserted.consumer";
import { serveJobState } from "./bus/responders/rpc.template-jobs.job.state";
import { BatchesInFlight, RecentSet, type TemplateJobsContext, type TemplateJobsDeps } from "./context";
import { entities } from "./db/entities";
import { Initial1764000000000 } from "./db/migrations/1764000000000-Initial";
import { RecipientsWithoutForeignKey1764100000000 } from "./db/migrations/1764100000000-RecipientsWithoutForeignKey";
import { JobsOrganizationPage1764200000000 } from "./db/migrations/1764200000000-JobsOrganizationPage";
import { JobOrigin1764300000000 } from "./db/migrations/1764300000000-JobOrigin";
import { IdempotencyBodyAsSent1764700000000 } from "./db/migrations/1764700000000-IdempotencyBodyAsSent";
import { CancelledRecipients1764800000000 } from "./db/migrations/1764800000000-CancelledRecipients";
import { OrganizationPlans1764800001000 } from "./db/migrations/1764800001000-OrganizationPlans";
import { StopRequests1764900000000 } from "./db/migrations/1764900000000-StopRequests";
import { SettleCancelled1764500000000 } from "./db/migrations/1764500000000-SettleCancelled";
import { envShape } from "./env";
import { LARGE_BODIES, buildRoutes } from "./routes";
import { startIdempotencySweeper } from "./workers/idempotency-sweeper";
import { startJobRunner } from "./workers/job-runner";

const contexts = new WeakMap<TemplateJobsDeps, TemplateJobsContext>();
function contextOf(deps: TemplateJobsDeps): TemplateJobsContext {
  let ctx = contexts.get(deps);
  if (!ctx) {
    ctx = { db: deps.db, bus: deps.bus, log: deps.log, env: deps.env, finalMessages: new RecentSet(), waitingMessages: new RecentSet(), cancelledJobs: new RecentSet(10_000), batches: new BatchesInFlight(), runs: new BatchesInFlight(), onRecipients: jobMetrics(deps) };
    contexts.set(deps, ctx);
  }
  return ctx;
}

/**
 * Job progress: recipients recorded by state (sent, failed, skipped, cancelled, waiting)
 * and, on every scrape, the jobs in each state.
 */
function jobMetrics(deps: TemplateJobsDeps): NonNullable<TemplateJobsContext["onRecipients"]> {
  const recipients = deps.metrics.counter("template_job_recipients_total", "Template job recipients recorded, by state (sent, failed, skipped, cancelled, waiting)", ["state"]);
  deps.metrics.gauge("template_jobs", "Template jobs by state", ["state"], async function () {
    const rows: Array<{ status: string; n: string }> = await deps.db
      .query(`SELECT status, count(*) AS n FROM template_jobs.jobs GROUP BY status`)
      .catch(() => []);
    this.reset();
    for (const state of ["queued", "running", "paused", "completed", "cancelled", "failed"]) this.set({ state }, 0);
    for (const r of rows) this.set({ state: r.status }, Number(r.n));
  });
  return (state, count) => recipients.inc({ state }, count);
}

/**
 * template-jobs: templates (admin API, provider status updates,
 * `template.status_updated`) and bulk template send jobs, run exactly once
 * per recipient through messaging's template send RPC
 * (docs/adr/0006-template-jobs-exactly-once.md).
 */
export const definition: ServiceDefinition<typeof envShape> = {
  name: "template-jobs",
  schema: "template_jobs",
  env: envShape,
  entities,
  migrations: [
    Initial1764000000000,
    outboxRequestIdMigration("template_jobs"),
    RecipientsWithoutForeignKey1764100000000,
    JobsOrganizationPage1764200000000,
    outboxTraceMigration("template_jobs"),
    JobOrigin1764300000000,
    SettleCancelled1764500000000,
    IdempotencyBodyAsSent1764700000000,
    CancelledRecipients1764800000000,
    OrganizationPlans1764800001000,
    StopRequests1764900000000,
  ],
  largeBodies: LARGE_BODIES,
  routes: (deps) => buildRoutes(contextOf(deps)),
  async start(deps) {
    const ctx = contextOf(deps);
    serveJobState(ctx);
    await consumeProviderInbound(ctx);
    await consumeMessageFinalEvents(ctx);
    await consumeOrganizationUpserted(ctx);
    const stopRunner = startJobRunner(ctx);
    return [stopRunner, startIdempotencySweeper(ctx)];
  },
};

export { envShape } from "./env";
export { sendKey } from "./use-cases/run-job";
