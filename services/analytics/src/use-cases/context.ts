import type { Bus } from "@platform/bus";
import type { Logger } from "@platform/logging";
import type { ServiceDeps, ServiceEnv } from "@platform/service";
import type { DataSource } from "typeorm";
import type { envShape } from "../env";

export type AnalyticsEnv = ServiceEnv<typeof envShape>;

/** What every use case of the service receives. */
export interface AnalyticsContext {
  env: AnalyticsEnv;
  db: DataSource;
  bus: Bus;
  log: Logger;
}

export function createContext(deps: ServiceDeps<AnalyticsEnv>): AnalyticsContext {
  return { env: deps.env, db: deps.db, bus: deps.bus, log: deps.log };
}

/** The Postgres schema this service owns. */
export const SCHEMA = "analytics";
