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
}
