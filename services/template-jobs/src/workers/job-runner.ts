import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
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
            const task = runJob(ctx, job, opts)
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
