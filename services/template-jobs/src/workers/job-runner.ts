import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { withRequestContext } from "@platform/logging";
import { endSpan, extractTrace, SpanKind, startSpan } from "@platform/telemetry";
import type { TemplateJobsContext } from "../context";
import { jobsRepository } from "../db/repositories/jobs.repository";
import { stopWaitingSends } from "../use-cases/jobs";
import { runJob, settleCancelled } from "../use-cases/run-job";

/** A settling sweep messaging did not answer is tried again after this long. */
const SETTLE_RETRY_MS = 5_000;

/** A job this replica runs. */
interface RunningJob {
  organizationId: string;
  startedAt: number;
  /** Set by the time slice: the run ends at its next batch and the job is due again, behind the waiting ones. */
  yield: boolean;
}

/**
 * The worker loop of one replica: takes due jobs (lease rows, `FOR UPDATE
 * SKIP LOCKED`, fairly between organizations) up to JOB_CONCURRENCY at once
 * and runs them. Scheduled jobs become due at `scheduled_for`, read from
 * Postgres, so a restart changes nothing; a replica that dies loses its
 * leases after JOB_LEASE_MS and another takes its jobs over. A throttled job
 * between distant slots is released (`run_after`), not held; and when the
 * replica is full while another organization's job waits, the job that has
 * run longest past JOB_SLICE_MS (of the organization with most jobs here)
 * gives its place back.
 */
export function startJobRunner(ctx: TemplateJobsContext): () => Promise<void> {
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  const running = new Map<Promise<void>, RunningJob>();
  let stopping = false;
  let wake: (() => void) | undefined;

  /** The time slice: at most one job yields at a time, for an organization with fewer jobs running here. */
  const sliceJobs = async () => {
    const now = Date.now();
    const jobs = [...running.values()];
    if (jobs.some((j) => j.yield) || !jobs.some((j) => now - j.startedAt >= ctx.env.JOB_SLICE_MS)) return;
    const here = new Map<string, number>();
    for (const j of jobs) here.set(j.organizationId, (here.get(j.organizationId) ?? 0) + 1);
    const waiting = await jobsRepository.waitingOrganizations(ctx.db, 100);
    if (waiting.length === 0) return;
    const fewest = Math.min(...waiting.map((o) => here.get(o) ?? 0));
    const victim = jobs
      .filter((j) => now - j.startedAt >= ctx.env.JOB_SLICE_MS && here.get(j.organizationId)! > fewest)
      .sort((a, b) => here.get(b.organizationId)! - here.get(a.organizationId)! || a.startedAt - b.startedAt)[0];
    if (victim) victim.yield = true;
  };

  /** A stopped job whose run left recipients `sending`: their outcomes from messaging, once its lease is over. */
  const settleDue = async () => {
    const job = await jobsRepository.claimSettling(ctx.db, owner, ctx.env.JOB_LEASE_MS);
    if (!job) return;
    try {
      const settled = await settleCancelled(ctx, job);
      if (settled > 0) ctx.log.info({ jobId: job.id, settled }, "recorded the sends a stopped run had left unrecorded");
    } catch (err) {
      ctx.log.warn({ jobId: job.id, err: (err as Error).message }, "settling a cancelled job failed; trying again shortly");
      await jobsRepository.settleLater(ctx.db, job.id, SETTLE_RETRY_MS);
    } finally {
      await jobsRepository.release(ctx.db, job.id, owner, null);
    }
  };

  /**
   * A job asked to stop whose holder died (ADR 0023): the batches that run left unanswered are recorded from
   * messaging's outcomes, a cancel's retried sends are ended, and only then does the stop take effect, so the job's
   * first final read has its final counts. Messaging not answering: tried again shortly; the job reads `running` meanwhile.
   */
  const finishAbandonedStop = async () => {
    const job = await jobsRepository.claimAbandonedStop(ctx.db, owner, ctx.env.JOB_LEASE_MS);
    if (!job) return;
    try {
      const settled = await settleCancelled(ctx, job);
      if (job.stop_as !== null) await stopWaitingSends(ctx, job.organization_id, job.id, job.stop_as);
      await jobsRepository.release(ctx.db, job.id, owner, null);
      ctx.log.warn({ jobId: job.id, stopAs: job.stop_as, settled }, "a job asked to stop whose holder died ended as asked");
    } catch (err) {
      ctx.log.warn({ jobId: job.id, err: (err as Error).message }, "ending a stopped job whose holder died failed; trying again shortly");
      await jobsRepository.holdFor(ctx.db, job.id, owner, SETTLE_RETRY_MS);
    }
  };

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
            const info: RunningJob = { organizationId: job.organization_id, startedAt: Date.now(), yield: false };
            const opts = { owner, leaseMs: ctx.env.JOB_LEASE_MS, isStopping: () => stopping, shouldYield: () => info.yield };
            const run = withRequestContext({ requestId: job.request_id ?? undefined, organizationId: job.organization_id, trace: traced.context }, () => runJob(ctx, job, opts));
            const task = run
              .finally(() => endSpan(traced.span))
              .catch((err) => ctx.log.warn({ jobId: job.id, err: (err as Error).message }, "job run ended with an error; it will be taken again"))
              .finally(() => {
                running.delete(task);
                wake?.();
              });
            running.set(task, info);
          }
        } catch (err) {
          ctx.log.warn({ err: (err as Error).message }, "claiming a job failed");
        }
      } else {
        await sliceJobs().catch((err) => ctx.log.warn({ err: (err as Error).message }, "time slice check failed"));
      }
      if (!claimed) {
        await finishAbandonedStop().catch((err) => ctx.log.warn({ err: (err as Error).message }, "ending an abandoned stop failed"));
        await settleDue().catch((err) => ctx.log.warn({ err: (err as Error).message }, "settling a cancelled job failed"));
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
    await Promise.allSettled([...running.keys()]);
  };
}
