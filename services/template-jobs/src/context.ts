import type { DataSource } from "typeorm";
import type { Bus } from "@platform/bus";
import type { Logger } from "@platform/logging";
import type { ServiceDeps, ServiceEnv } from "@platform/service";
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
  /** Recipients recorded, by state (metrics). */
  onRecipients?: (state: "sent" | "failed" | "skipped" | "waiting", count: number) => void;
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
