import type { Logger } from "@platform/logging";
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { ArrivalLinger } from "./linger";

export { ArrivalLinger };
export { BoundedMap } from "./bounded-map";
export { post, postTarget, PostTimeoutError, type PostAnswer, type PostOptions } from "./post";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Retries a startup step until it succeeds (or `signal` aborts): Postgres or
 * NATS not being up yet is a startup-order problem, not a reason to crash.
 * Backoff doubles from 250 ms to 5 s; each failure is one log line.
 */
export async function waitFor<T>(label: string, step: () => Promise<T>, log: Logger, signal?: AbortSignal): Promise<T> {
  let delay = 250;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (signal?.aborted) throw err;
      log.warn({ dependency: label, attempt, err: (err as Error).message, retryInMs: delay }, "dependency not ready, retrying");
      await sleep(delay);
      delay = Math.min(delay * 2, 5_000);
    }
  }
}

type Closer = () => Promise<void> | void;

/**
 * Graceful shutdown: on SIGINT/SIGTERM run the closers in reverse order of
 * registration (stop taking requests first, close the database last), then exit 0.
 * A second signal, or closers hanging past `timeoutMs`, exits at once. A
 * process started with an IPC channel also stops when its parent goes away.
 */
export class Lifecycle {
  private readonly closers: Array<{ name: string; close: Closer }> = [];
  private stopping = false;

  constructor(private readonly log: Logger, private readonly timeoutMs = 10_000) {}

  onStop(name: string, close: Closer): void {
    this.closers.push({ name, close });
  }

  installSignalHandlers(): void {
    const handler = (signal: NodeJS.Signals) => {
      if (this.stopping) process.exit(1);
      this.log.info({ signal }, "shutting down");
      void this.stop().then(() => process.exit(0));
    };
    process.on("SIGINT", handler);
    process.on("SIGTERM", handler);
    // Started by a supervisor over IPC (`npm start`): when it is gone, even killed outright, stop too rather than linger.
    if (process.send) {
      process.once("disconnect", () => {
        if (this.stopping) return;
        this.log.info("supervisor gone, shutting down");
        void this.stop().then(() => process.exit(0));
      });
    }
    process.on("unhandledRejection", (reason) => {
      this.log.error({ err: reason instanceof Error ? { message: reason.message, stack: reason.stack } : reason }, "unhandled rejection");
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const timer = setTimeout(() => {
      this.log.error({ timeoutMs: this.timeoutMs }, "shutdown timed out");
      process.exit(1);
    }, this.timeoutMs);
    timer.unref();
    for (const { name, close } of [...this.closers].reverse()) {
      try {
        await close();
      } catch (err) {
        this.log.warn({ component: name, err: (err as Error).message }, "error while closing");
      }
    }
    clearTimeout(timer);
  }
}

interface Pending<In, Out> {
  item: In;
  resolve(value: Out): void;
  reject(err: unknown): void;
}

/**
 * Coalesces concurrent calls into batches, per key. A batch starts at the end
 * of the event-loop turn in which its first call arrived (`setImmediate`), so
 * the calls of one turn (say, several requests read from the network at once)
 * go together; calls arriving while a batch is in flight wait and go together
 * in the next one (at most `maxBatch`). A quiet path pays next to nothing; a
 * busy one pays one round trip per batch instead of one per call. Every batch
 * starts after its callers arrived, so it sees what they saw committed.
 * `run` answers one result per item, in order.
 *
 * `maxInFlight` (default 1) lets that many batches of one key be in flight at
 * once: calls arriving while one is in flight start the next batch at the end
 * of their turn instead of waiting for the first to finish. Worth it where a
 * round trip is long next to the work it carries (a bus request to another
 * process): a request then waits for at most its own batch, not for the one
 * before it too. Results still go to each batch's own callers.
 *
 * `linger` (default 0) holds a batch that would start on an idle key that
 * many milliseconds, so calls arriving a few milliseconds apart (a steady
 * stream below saturation) share it too. Each caller waits at most that much
 * longer; below saturation the round trip per call is what the CPU goes to.
 * An `ArrivalLinger` reads the wait from the key's recent arrivals instead:
 * about two gaps in a stream, none for a trickle (ADR 0016).
 */
export class Batcher<In, Out> {
  private readonly queues = new Map<string, { waiting: Array<Pending<In, Out>>; running: number; scheduled: boolean }>();
  /** Batches run so far (for tests and metrics). */
  batches = 0;

  constructor(
    private readonly run: (key: string, items: In[]) => Promise<Out[]>,
    private readonly maxBatch = 500,
    private readonly maxInFlight = 1,
    private readonly linger: number | ArrivalLinger = 0,
  ) {}

  submit(key: string, item: In): Promise<Out> {
    if (typeof this.linger !== "number") this.linger.arrived(key);
    let queue = this.queues.get(key);
    if (!queue) {
      queue = { waiting: [], running: 0, scheduled: false };
      this.queues.set(key, queue);
    }
    const result = new Promise<Out>((resolve, reject) => queue!.waiting.push({ item, resolve, reject }));
    this.schedule(key, queue);
    return result;
  }

  /** Starts a drain loop at the end of this turn when fewer than `maxInFlight` are running and none is about to start. */
  private schedule(key: string, queue: { waiting: Array<Pending<In, Out>>; running: number; scheduled: boolean }): void {
    if (queue.scheduled || queue.running >= this.maxInFlight) return;
    queue.scheduled = true;
    const start = () => {
      queue.scheduled = false;
      void this.drain(key, queue);
    };
    // Only the first batch of an idle key lingers: the calls arriving while one is in flight are grouped anyway.
    const lingerMs = queue.running > 0 ? 0 : typeof this.linger === "number" ? this.linger : this.linger.delayMs(key);
    if (lingerMs > 0) setTimeout(start, lingerMs);
    else setImmediate(start);
    queue.running++;
  }

  private async drain(key: string, queue: { waiting: Array<Pending<In, Out>>; running: number; scheduled: boolean }): Promise<void> {
    try {
      while (queue.waiting.length > 0) {
        const batch = queue.waiting.splice(0, this.maxBatch);
        this.batches++;
        // More than one batch waiting: another loop may take it (only below maxInFlight).
        if (queue.waiting.length > 0) this.schedule(key, queue);
        try {
          const results = await this.run(key, batch.map((p) => p.item));
          batch.forEach((p, i) => p.resolve(results[i]));
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      queue.running--;
      if (queue.running === 0 && !queue.scheduled && queue.waiting.length === 0) this.queues.delete(key);
    }
  }
}

/**
 * The share of time some task waited for a CPU, from Linux pressure stall information: the container's own cgroup
 * (`cpu.pressure` in cgroup v2, where a Kubernetes CPU limit throttles), else the whole machine (`/proc/pressure/cpu`).
 * `read()` gives the share since the previous read (0 to 1), or undefined where the kernel keeps no such figure.
 */
export class CpuPressure {
  static readonly MAX_WINDOW_US = 1_000_000;
  private readonly file?: string;
  private last?: { stalledUs: number; atUs: number };

  constructor(
    files: string[] = CpuPressure.candidates(),
    private readonly nowUs: () => number = () => Number(process.hrtime.bigint() / 1000n),
  ) {
    this.file = files.find((f) => CpuPressure.stalledUs(f) !== undefined);
  }

  static candidates(): string[] {
    const files: string[] = [];
    try {
      // cgroup v2: "0::/kubepods/…" on a host, "0::/" inside a container's own cgroup namespace.
      const own = /^0::(.*)$/m.exec(readFileSync("/proc/self/cgroup", "utf8"))?.[1];
      if (own !== undefined) files.push(`/sys/fs/cgroup${own === "/" ? "" : own}/cpu.pressure`);
    } catch {
      /* not Linux */
    }
    files.push("/proc/pressure/cpu");
    return files;
  }

  /** Microseconds some task stalled in all, from a PSI file's "some … total=" line. */
  static stalledUs(file: string): number | undefined {
    try {
      const total = /^some .*total=(\d+)/m.exec(readFileSync(file, "utf8"))?.[1];
      return total === undefined ? undefined : Number(total);
    } catch {
      return undefined;
    }
  }

  get available(): boolean {
    return this.file !== undefined;
  }

  read(): number | undefined {
    if (!this.file) return undefined;
    const stalledUs = CpuPressure.stalledUs(this.file);
    if (stalledUs === undefined) return undefined;
    const atUs = this.nowUs();
    const prev = this.last;
    this.last = { stalledUs, atUs };
    // A share over more than a second (the reader was idle meanwhile) says nothing about now: it only sets the baseline.
    if (!prev || atUs <= prev.atUs || atUs - prev.atUs > CpuPressure.MAX_WINDOW_US) return undefined;
    return Math.min(1, Math.max(0, (stalledUs - prev.stalledUs) / (atUs - prev.atUs)));
  }
}

export interface LoadGateOptions {
  /** Event-loop delay (ms, worst in the last sample window) above which the process counts as busy; 0 never. */
  lagMs: number;
  /** Length of one sample window. */
  sampleMs?: number;
  /** Callers waiting for a database connection (or any other queue the API shares with background work). */
  waiting?: () => number;
  /**
   * Whether there is anything to step back for: requests being served now or a moment ago. Without it the gate
   * would also slow the consumers of a process that serves nobody, only because other processes took the CPU.
   */
  serving?: () => boolean;
  /**
   * Whether integrators' API requests are being served anywhere in the stack (this process or another, told by
   * broadcast). While they are and the CPU is short (`cpuPressure` above `pressureShare`), the process is busy even
   * if it serves nobody itself: the stack's background work yields the CPU to those requests.
   */
  interactive?: () => boolean;
  /** The share of the last window some task waited for a CPU (`CpuPressure.read`); undefined: unknown. */
  cpuPressure?: () => number | undefined;
  /** Above this share of stalled time the CPU is short; 0 never. */
  pressureShare?: number;
}

/**
 * Tells background consumers when to step back so the requests served by
 * the stack keep their latency. The process is busy
 * - while it serves requests (`serving`) and its event loop is late (the worst
 *   delay of the last window, `monitorEventLoopDelay`) or someone waits for a
 *   database connection; or
 * - while API requests are served anywhere (`interactive`) and the CPU is
 *   short (pressure stall information above `pressureShare`): processes that
 *   serve nobody themselves (messaging's inbound, the dispatcher) then leave
 *   the CPU to those that do.
 * A consumer asks `busy` before starting another message and, when busy,
 * holds back and waits for `calm()` (bounded by the caller); a backlog then
 * waits in JetStream, where it costs nothing, instead of in the run queue,
 * the event loop or the pool's queue. The sample timer is unref'd.
 */
export class LoadGate {
  private readonly histogram?: ReturnType<typeof monitorEventLoopDelay>;
  private readonly timer?: NodeJS.Timeout;
  private lagBusy = false;
  private lagMonitorOn = false;
  private cpuShort = false;
  private waiters: Array<() => void> = [];
  /** Times a consumer was held back (metrics, tests). */
  holds = 0;

  constructor(private readonly opts: LoadGateOptions) {
    const sampleMs = opts.sampleMs ?? 50;
    if (opts.lagMs > 0) this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.sample();
    this.timer = setInterval(() => this.sample(), sampleMs);
    this.timer.unref();
  }

  /**
   * One window's figures: called by the timer, and by tests. Each figure is taken only while it can matter, so an
   * idle process pays for neither: the delay monitor (a 10 ms timer) runs while the process serves requests, and the
   * pressure file is read while requests are served anywhere in the stack.
   */
  sample(): void {
    if (this.histogram) {
      const serving = this.opts.serving?.() ?? true;
      if (serving && this.lagMonitorOn) {
        // The monitor's timer fires every 10 ms: what it records beyond that is lateness.
        this.lagBusy = this.histogram.max / 1e6 - 10 > this.opts.lagMs;
        this.histogram.reset();
      } else if (serving) {
        this.histogram.enable();
        this.lagMonitorOn = true;
      } else if (this.lagMonitorOn) {
        this.histogram.disable();
        this.histogram.reset();
        this.lagMonitorOn = false;
        this.lagBusy = false;
      }
    }
    const share = this.opts.pressureShare ?? 0;
    if (share > 0 && this.opts.cpuPressure) this.cpuShort = this.interactive ? (this.opts.cpuPressure() ?? 0) > share : false;
    if (!this.busy) this.release();
  }

  /** Whether the event-loop delay monitor runs now (only while the process serves requests). */
  get monitoringLag(): boolean {
    return this.lagMonitorOn;
  }

  private release(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Whether API requests are served anywhere in the stack now (`interactive`). */
  get interactive(): boolean {
    return this.opts.interactive?.() ?? false;
  }

  get busy(): boolean {
    if (this.cpuShort && (this.opts.interactive?.() ?? false)) return true;
    if (this.opts.serving && !this.opts.serving()) return false;
    return this.lagBusy || (this.opts.waiting?.() ?? 0) > 0;
  }

  /** Resolves at the first sample that finds the process calm, or after `maxMs`. */
  calm(maxMs: number): Promise<void> {
    if (!this.busy) return Promise.resolve();
    this.holds++;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, maxMs);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.push(done);
    });
  }

  stop(): void {
    clearInterval(this.timer);
    this.histogram?.disable();
    this.release();
  }
}
