import type { DataSource } from "typeorm";
import type { Bus } from "@platform/bus";
import type { Logger } from "@platform/logging";
import type { ServiceDeps, ServiceEnv } from "@platform/service";
import type { FinalState } from "./db/repositories/jobs.repository";
import type { envShape } from "./env";

export type TemplateJobsEnv = ServiceEnv<typeof envShape>;
export type TemplateJobsDeps = ServiceDeps<TemplateJobsEnv>;

/** What the use cases need: connections and config (one per process). */
export interface TemplateJobsContext {
  db: DataSource;
  bus: Bus;
  log: Logger;
  env: TemplateJobsEnv;
  /** Message ids this process recorded as final (`sent`/`failed`): their `message.*` events need no lookup. */
  finalMessages: RecentSet;
  /** Message ids this process recorded as `waiting` (messaging retries them; their event settles them). */
  waitingMessages: RecentSet;
  /** Jobs cancelled through this process: a run here waiting for a throttle slot stops at once instead of at its next lease renewal. */
  cancelledJobs: RecentSet;
  /** Runs of each job in this process, from their claim to their release: a cancel waits for them to end. */
  runs: BatchesInFlight;
  /** Send batches of each job in flight in this process: an early event waits for its batch's answer here. */
  batches: BatchesInFlight;
  /** Recipients recorded, by state (metrics). */
  onRecipients?: (state: FinalState | "waiting", count: number) => void;
}

/** A bounded set of recent strings; the oldest go first. */
export class RecentSet {
  private readonly set = new Set<string>();
  constructor(private readonly max = 200_000) {}
  add(value: string): void {
    this.set.add(value);
    if (this.set.size > this.max) this.set.delete(this.set.values().next().value!);
  }
  has(value: string): boolean {
    return this.set.has(value);
  }
}

/**
 * Send batches in flight per job in this process. A `message.sent` of a template send usually arrives before the
 * answer of its batch has been recorded (the batch answers once all its sends are done). While a batch of that job
 * is in flight here, the event waits for the next batch to be recorded (`settled`) instead of going back to the
 * stream for a redelivery a second later: a third of a 50,000-recipient job's events did, each with four statements.
 */
export class BatchesInFlight {
  private readonly count = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();

  begin(jobId: string): void {
    this.count.set(jobId, (this.count.get(jobId) ?? 0) + 1);
  }

  /** A batch of the job was recorded (or gave up): every event waiting on the job looks again. */
  end(jobId: string): void {
    const n = (this.count.get(jobId) ?? 1) - 1;
    if (n > 0) this.count.set(jobId, n);
    else this.count.delete(jobId);
    const waiting = this.waiters.get(jobId);
    if (!waiting) return;
    this.waiters.delete(jobId);
    for (const wake of waiting) wake();
  }

  inFlight(jobId: string): boolean {
    return this.count.has(jobId);
  }

  /** Resolves when the next batch of the job ends, or after `timeoutMs`. */
  settled(jobId: string, timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let waiting = this.waiters.get(jobId);
      if (!waiting) this.waiters.set(jobId, (waiting = new Set()));
      const wake = () => {
        clearTimeout(timer);
        this.waiters.get(jobId)?.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, Math.max(0, timeoutMs));
      timer.unref();
      waiting.add(wake);
    });
  }
}
