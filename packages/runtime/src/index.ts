import type { Logger } from "@platform/logging";

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
 * A second signal, or closers hanging past `timeoutMs`, exits at once.
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
