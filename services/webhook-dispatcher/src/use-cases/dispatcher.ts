/**
 * The delivery workers of one process. Jobs live in Postgres (durable: a
 * restart loses no pending retry); this loop claims the due ones and runs
 * each attempt concurrently, bounded per webhook (a hanging endpoint only
 * ever occupies its own slots) and globally. It wakes at once when this
 * process stores new jobs, at the due time of the retries it scheduled, and
 * polls every second for the rest (jobs of a replica that died). No
 * LISTEN/NOTIFY: a NOTIFY serializes the commits of every inserting
 * transaction, which capped ingestion far below the target rate.
 * Finished attempts are written in batches (group commit), so a busy
 * dispatcher does one transaction for many deliveries.
 */
import { WEBHOOK_MAX_RETRIES } from "@platform/contracts";
import type { Logger } from "@platform/logging";
import { newId } from "@platform/id";
import { sleep } from "@platform/runtime";
import { httpClientSpan } from "@platform/telemetry";
import type { ClaimedJob, DeliveryRepository, JobCompletion } from "../db/repositories/delivery.repository";
import type { HttpSender } from "./http-sender";
import { deliveryHeaders } from "./payload";

/** Attempts after the first one (service-spec: up to 3 retries). */
export const MAX_RETRIES = WEBHOOK_MAX_RETRIES;
/** How long the recording of finished attempts waits for the ones finishing right after (one statement for all). */
const COMPLETION_LINGER_MS = 5;
/**
 * A process beats this often in `dispatchers`, alive for ALIVE_FOR_MS after each beat; a process whose beat stopped
 * that long ago has died (or lost Postgres): its leased jobs are due again at once, instead of after their lease of
 * 4 × WEBHOOK_TIMEOUT_MS + 60 s (ADR 0019). Each beat also frees the leases of the dead.
 */
export const BEAT_EVERY_MS = 3_000;
export const ALIVE_FOR_MS = 15_000;

export interface DispatcherOptions {
  repo: DeliveryRepository;
  sender: HttpSender;
  log: Logger;
  /** Delays before retry 1, 2, 3 (the last one repeats if the list is shorter). */
  retryDelaysMs: number[];
  timeoutMs: number;
  /** Attempts in flight at once to one webhook, in this process (default: `WEBHOOK_CONCURRENCY_PER_ENDPOINT`'s, 32). */
  perWebhook?: number;
  /** Bounds the jobs this process holds at once (running and prefetched) to twice this. */
  global?: number;
  pollMs?: number;
  /** The beat's period and how long each beat keeps this process alive (defaults BEAT_EVERY_MS, ALIVE_FOR_MS; tests shorten them). */
  beatEveryMs?: number;
  aliveForMs?: number;
  onDeactivated?: (webhookIds: string[]) => void;
  /** Called once per finished attempt (metrics): delivered, or failed and retried later, or failed for good. */
  onAttempt?: (outcome: "delivered" | "retry" | "failed", durationMs: number) => void;
}

interface Lane {
  /** Attempts running now. */
  running: number;
  /** The messages (`data.messageId`) with an attempt running now: their later events wait in the queue. */
  messages: Set<string>;
  /** Claimed (leased) jobs waiting for a free slot of this webhook. */
  queue: ClaimedJob[];
  /** The lane was full at the last claim, so more of its jobs may be due. */
  mayHaveMore: boolean;
}

/**
 * `data.messageId` of a message event's body. The body is our own JSON serialization, in which `"messageId":"` can only
 * be a key (a quote inside a string value is escaped), and `data.messageId` is the envelope's only such key: a match
 * instead of parsing every body.
 */
const MESSAGE_ID = /"messageId":"((?:[^"\\]|\\.)*)"/;
export function messageOf(job: Pick<ClaimedJob, "event" | "body">): string | undefined {
  if (!job.event.startsWith("message.")) return undefined;
  return MESSAGE_ID.exec(job.body)?.[1];
}

export class Dispatcher {
  /** One lane per webhook: its own slots and its own small prefetch queue, so nobody waits behind it. */
  private readonly lanes = new Map<string, Lane>();
  private readonly running = new Map<string, { job: ClaimedJob; promise: Promise<void> }>();
  /** Jobs held by this process (running + queued). */
  private held = 0;
  private poolMayHaveMore = false;
  private stopped = false;
  private loop?: Promise<void>;
  private wakeResolve?: () => void;
  private woken = false;
  private timers = new Set<NodeJS.Timeout>();
  private pendingCompletions: JobCompletion[] = [];
  private readonly cutShort: string[] = [];
  private flushing?: Promise<void>;
  private readonly perWebhook: number;
  private readonly global: number;
  private beatTimer?: NodeJS.Timeout;

  constructor(private readonly opts: DispatcherOptions) {
    this.perWebhook = opts.perWebhook ?? 32;
    this.global = opts.global ?? 256;
  }

  /** Jobs one webhook may hold in this process: its running slots plus as many prefetched. */
  private get laneCapacity(): number {
    return this.perWebhook * 4;
  }

  start(): void {
    this.loop = this.run();
    void this.beat();
  }

  /** This process's beat, and the leases of processes whose beat stopped freed for the claim. */
  private async beat(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.opts.repo.beat(this.opts.aliveForMs ?? ALIVE_FOR_MS);
      const freed = await this.opts.repo.freeDeadLeases();
      if (freed > 0) {
        this.opts.log.warn({ freed }, "delivery jobs of a dispatcher process that stopped beating are due again");
        this.wake();
      }
    } catch (err) {
      this.opts.log.warn({ err: (err as Error).message }, "dispatcher beat failed");
    }
    if (this.stopped) return;
    this.beatTimer = setTimeout(() => void this.beat(), this.opts.beatEveryMs ?? BEAT_EVERY_MS);
    this.beatTimer.unref();
  }

  /** New jobs may be due: claim now. */
  wake(): void {
    this.woken = true;
    this.wakeResolve?.();
  }

  private wakeAt(delayMs: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake();
    }, delayMs + 5);
    this.timers.add(timer);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.woken = false;
      const free = Math.min(this.global * 2 - this.held, 500);
      if (free > 0) {
        try {
          const busy = new Map<string, number>();
          for (const [id, lane] of this.lanes) busy.set(id, lane.running + lane.queue.length);
          const claimStarted = performance.now();
          const jobs = await this.opts.repo.claim({
            limit: free,
            perWebhook: this.laneCapacity,
            busy,
            leaseMs: this.leaseMs,
          });
          failures = 0;
          this.opts.log.debug({ claimed: jobs.length, free, held: this.held, ms: Math.round(performance.now() - claimStarted) }, "claimed delivery jobs");
          const got = new Map<string, number>();
          for (const job of jobs) got.set(job.webhookId, (got.get(job.webhookId) ?? 0) + 1);
          for (const job of jobs) this.enqueue(job);
          // A lane that got all it was allowed (or none because it was full) may have more due jobs.
          for (const [id, lane] of this.lanes) {
            const allowed = this.laneCapacity - (busy.get(id) ?? 0);
            lane.mayHaveMore = (got.get(id) ?? 0) >= allowed;
          }
          this.poolMayHaveMore = jobs.length >= free;
          if (jobs.length >= free) continue;
        } catch (err) {
          failures++;
          this.opts.log.warn({ err: (err as Error).message, failures }, "claiming delivery jobs failed");
          await sleep(Math.min(5_000, 100 * 2 ** failures));
          continue;
        }
      }
      if (this.stopped) break;
      if (this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.opts.pollMs ?? 1_000);
        this.wakeResolve = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeResolve = undefined;
    }
  }

  /** What the ingestor needs to create jobs already leased to this process. */
  leaseTerms(): { busy: Map<string, number>; capacity: number; leaseMs: number } {
    const busy = new Map<string, number>();
    for (const [id, lane] of this.lanes) busy.set(id, lane.running + lane.queue.length);
    return { busy, capacity: this.stopped ? 0 : this.laneCapacity, leaseMs: this.leaseMs };
  }

  /** Jobs created already leased to this process start now; `moreDue` means some were left for the claim loop. */
  adopt(jobs: ClaimedJob[], moreDue: boolean): void {
    for (const job of jobs) this.enqueue(job);
    if (moreDue) {
      for (const lane of this.lanes.values()) lane.mayHaveMore = true;
      this.wake();
    }
  }

  private get leaseMs(): number {
    // Covers the attempt and the wait behind the lane's own slots (at most 3 rounds).
    return this.opts.timeoutMs * 4 + 60_000;
  }

  private enqueue(job: ClaimedJob): void {
    let lane = this.lanes.get(job.webhookId);
    if (!lane) {
      lane = { running: 0, messages: new Set(), queue: [], mayHaveMore: false };
      this.lanes.set(job.webhookId, lane);
    }
    lane.queue.push(job);
    this.held++;
    this.pump(job.webhookId, lane);
  }

  /**
   * Starts the lane's queued jobs, in queue order, while it has free slots. A job of a message whose earlier event is
   * being delivered to this webhook waits for that attempt to end, so a healthy endpoint receives one message's
   * `message.sent`, `.delivered` and `.read` in the order they happened, not in whichever order concurrent requests
   * land. An attempt that fails does not hold the message's later events back for its retries.
   */
  private pump(webhookId: string, lane: Lane): void {
    for (let i = 0; lane.running < this.perWebhook && i < lane.queue.length && !this.stopped; ) {
      const message = messageOf(lane.queue[i]!);
      if (message !== undefined && lane.messages.has(message)) {
        i++;
        continue;
      }
      const [job] = lane.queue.splice(i, 1);
      this.startAttempt(job!, lane, message);
    }
    if (lane.running === 0 && lane.queue.length === 0) this.lanes.delete(webhookId);
  }

  private startAttempt(job: ClaimedJob, lane: Lane, message: string | undefined): void {
    lane.running++;
    if (message !== undefined) lane.messages.add(message);
    const promise = this.attempt(job)
      .catch((err) => this.opts.log.error({ webhookId: job.webhookId, err: (err as Error).message }, "delivery attempt crashed"))
      .finally(() => {
        this.running.delete(job.jobId);
        if (message !== undefined) lane.messages.delete(message);
        lane.running--;
        this.held--;
        this.pump(job.webhookId, lane);
        // Refill in batches: when a lane that was full (or the whole pool) has drained to half.
        if (lane.mayHaveMore && lane.running + lane.queue.length <= this.perWebhook) {
          lane.mayHaveMore = false;
          this.wake();
        } else if (this.poolMayHaveMore && this.held <= this.global) {
          this.poolMayHaveMore = false;
          this.wake();
        }
      });
    this.running.set(job.jobId, { job, promise });
  }

  private async attempt(job: ClaimedJob): Promise<void> {
    const deliveryId = newId("delivery");
    const startedAt = new Date();
    // The body's bytes once for both signatures and the request.
    const body = Buffer.from(job.body, "utf8");
    const headers = deliveryHeaders({ body, secret: job.secret, event: job.event, eventId: job.eventId, deliveryId, now: startedAt });
    // A client span (tracing on) under the event's trace; our traceparent is not sent to the integrator's endpoint (ADR 0011).
    const span = httpClientSpan("POST", job.url, job.trace, { "webhook.id": job.webhookId, "webhook.event": job.event, "webhook.attempt": job.attempt });
    const outcome = await this.opts.sender.send(job.url, body, headers);
    span.end(outcome.status ?? undefined, outcome.ok || outcome.status !== null ? undefined : outcome.error);
    // Cut short by shutdown: not a failure of the endpoint; released for the next start.
    if (this.stopped && outcome.status === null) {
      this.cutShort.push(job.jobId);
      return;
    }
    const retryInMs = outcome.ok || job.attempt > MAX_RETRIES ? null : this.retryDelay(job.attempt);
    if (!outcome.ok) {
      this.opts.log.info(
        { webhookId: job.webhookId, eventId: job.eventId, attempt: job.attempt, status: outcome.status, error: outcome.error, retryInMs },
        "webhook delivery failed",
      );
    }
    this.opts.onAttempt?.(outcome.ok ? "delivered" : retryInMs !== null ? "retry" : "failed", outcome.durationMs);
    this.pendingCompletions.push({
      jobId: job.jobId,
      webhookId: job.webhookId,
      ok: outcome.ok,
      retryInMs,
      record: {
        deliveryId,
        webhookId: job.webhookId,
        organizationId: job.organizationId,
        eventId: job.eventId,
        event: job.event,
        attempt: job.attempt,
        responseStatus: outcome.status,
        responseBody: outcome.body,
        error: outcome.error,
        durationMs: outcome.durationMs,
        createdAt: startedAt,
      },
    });
    this.scheduleFlush();
  }

  /** Delay before the attempt after `attempt` (1-based): retry n waits retryDelaysMs[n-1]. */
  private retryDelay(attempt: number): number {
    const delays = this.opts.retryDelaysMs;
    return delays[Math.min(attempt - 1, delays.length - 1)];
  }

  private scheduleFlush(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      // A moment for the attempts finishing right after this one: one statement records them all (ADR 0010).
      await sleep(COMPLETION_LINGER_MS);
      while (this.pendingCompletions.length > 0) {
        const batch = this.pendingCompletions.splice(0, 500);
        for (let tries = 1; ; tries++) {
          try {
            const deactivated = await this.opts.repo.complete(batch);
            // The retries are due `retryInMs` after this write (the statement's now()): wake then, not before, or the
            // claim finds them not yet due and they wait for the next poll.
            for (const c of batch) if (c.retryInMs !== null) this.wakeAt(c.retryInMs);
            if (deactivated.length) {
              this.opts.log.warn({ webhookIds: deactivated }, "webhooks deactivated after consecutive failures");
              this.opts.onDeactivated?.(deactivated);
            }
            break;
          } catch (err) {
            this.opts.log.error({ err: (err as Error).message, tries }, "recording delivery attempts failed");
            // The jobs stay leased, so nothing is lost if this keeps failing: they are attempted again later.
            if (tries >= 5 || this.stopped) break;
            await sleep(200 * tries);
          }
        }
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.pendingCompletions.length) this.scheduleFlush();
    });
  }

  /** Jobs held by this process, running or queued (tests, metrics). */
  heldCount(): number {
    return this.held;
  }

  /**
   * Stops claiming, aborts attempts in flight and makes their jobs due again
   * at once (a shutdown is not the endpoint's failure), then writes what finished.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    clearTimeout(this.beatTimer);
    for (const t of this.timers) clearTimeout(t);
    await this.loop;
    const queued = [...this.lanes.values()].flatMap((l) => l.queue.splice(0));
    const cut = [...this.running.values()];
    await this.opts.sender.close();
    await Promise.allSettled(cut.map((r) => r.promise));
    while (this.flushing) await this.flushing;
    await this.opts.repo.release([...this.cutShort, ...queued.map((j) => j.jobId)]).catch(() => undefined);
    await this.opts.repo.leave().catch(() => undefined);
  }
}
