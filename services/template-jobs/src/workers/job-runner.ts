import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { withRequestContext } from "@platform/logging";
import { endSpan, extractTrace, SpanKind, startSpan } from "@platform/telemetry";
import type { TemplateJobsContext } from "../context";
import { jobsRepository } from "../db/repositories/jobs.repository";
import { runJob } from "../use-cases/run-job";

/**
 * The worker loop of one replica: takes due jobs (lease rows, `FOR UPDATE
 * SKIP LOCKED`) up to JOB_CONCURRENCY at once and runs them. Scheduled jobs
 * become due at `scheduled_for`, read from Postgres, so a restart changes
 * nothing; a replica that dies loses its leases after JOB_LEASE_MS and
 * another takes its jobs over.
 */
export function startJobRunner(ctx: TemplateJobsContext): () => Promise<void> {
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  const running = new Set<Promise<void>>();
  let stopping = false;
  let wake: (() => void) | undefined;
  const opts = { owner, leaseMs: ctx.env.JOB_LEASE_MS, isStopping: () => stopping };

  const loop = (async () => {
    while (!stopping) {
      let claimed = false;
      if (running.size < ctx.env.JOB_CONCURRENCY) {
        try {
          const job = await jobsRepository.claimJob(ctx.db, owner, ctx.env.JOB_LEASE_MS);
          if (job) {
            claimed = true;
            // The run continues the request that created the job: its request id on log lines and on the sends' events
            // (through the template send RPC's headers), and its trace under a `template job run` span.
            const traced = startSpan("template job run", SpanKind.INTERNAL, extractTrace((name) => (name === "traceparent" ? (job.traceparent ?? undefined) : undefined)), {
              "template_job.id": job.id,
            });
            const run = withRequestContext({ requestId: job.request_id ?? undefined, organizationId: job.organization_id, trace: traced.context }, () => runJob(ctx, job, opts));
            const task = run
              .finally(() => endSpan(traced.span))
              .catch((err) => ctx.log.warn({ jobId: job.id, err: (err as Error).message }, "job run ended with an error; it will be taken again"))
              .finally(() => {
                running.delete(task);
                wake?.();
              });
            running.add(task);
          }
        } catch (err) {
          ctx.log.warn({ err: (err as Error).message }, "claiming a job failed");
        }
      }
      if (!claimed) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ctx.env.JOB_POLL_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    }
  })();

  return async () => {
    stopping = true;
    wake?.();
    await loop;
    await Promise.allSettled([...running]);
  };
}
