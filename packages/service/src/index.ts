import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Router } from "express";
import type { DataSource } from "typeorm";
import { z } from "zod";
import { Bus, OutboxRelay } from "@platform/bus";
import { internalServiceEnv, parseEnv } from "@platform/config";
import { openDatabase, pingDatabase, poolWaiting, type DatabaseOptions } from "@platform/db";
import { createHttpServer, createMetrics, createServiceHandler, drainHttpServer, instrumentBus, instrumentOutbox, type JsonRoute, type LargeBodies, type Metrics } from "@platform/http";
import { createLogger, type Logger } from "@platform/logging";
import { SUBJECTS } from "@platform/contracts";
import { CpuPressure, Lifecycle, LoadGate, waitFor } from "@platform/runtime";
import { startTracing } from "@platform/telemetry";

/** What a service's wiring receives: its parsed env and its connections. */
export interface ServiceDeps<E> {
  env: E;
  log: Logger;
  db: DataSource;
  bus: Bus;
  metrics: Metrics;
  /** The service's own schema (outbox, raw SQL). */
  schema: string;
}

export interface ServiceDefinition<S extends z.ZodRawShape> {
  /** Folder name under services/, also the log's `service` field. */
  name: string;
  /** The Postgres schema this service owns. */
  schema: string;
  /** Extra env variables beyond the shared ones (DATABASE_URL, NATS_URL, PORT, INTERNAL_TOKEN, …). */
  env: S;
  entities: DatabaseOptions["entities"];
  migrations: DatabaseOptions["migrations"];
  /** Express routes (paths as the gateway forwards them). */
  routes(deps: ServiceDeps<ServiceEnv<S>>): Router;
  /** Routes answered with JSON, served by express and, for their exact path, by the fast path (ADR 0005). */
  jsonRoutes?(deps: ServiceDeps<ServiceEnv<S>>): JsonRoute[];
  /** Bus consumers, request/reply responders and background workers; returns closers. */
  start?(deps: ServiceDeps<ServiceEnv<S>>): Promise<Array<() => Promise<void> | void>> | Array<() => Promise<void> | void>;
  /** Routes that take bodies over the 1 MB of every other route (template-jobs' `/templates/send`). */
  largeBodies?: LargeBodies;
  /** Publishes this service's outbox (every service with events has one). */
  outbox?: boolean;
}

const baseSchema = z.object(internalServiceEnv);
const PROBE_PATH = /^\/(healthz|readyz|metrics)(\?|\/|$)/;
/** How often a process serving HTTP requests tells the others (`bcast.load.serving.v1`): at most this often. */
const SERVING_ANNOUNCE_MS = 250;

/** The CPU pressure of the container (or machine), or undefined where the kernel keeps none (not Linux, old kernel). */
function cpuPressureReader(): (() => number | undefined) | undefined {
  const pressure = new CpuPressure();
  return pressure.available ? () => pressure.read() : undefined;
}
export type BaseServiceEnv = z.infer<typeof baseSchema>;
export type ServiceEnv<S extends z.ZodRawShape> = BaseServiceEnv & z.infer<z.ZodObject<S>>;

export interface RunningService<E> {
  deps: ServiceDeps<E>;
  url: string;
  port: number;
  server: Server;
  /** When background consumers step back (ADR 0010). */
  loadGate: LoadGate;
  stop(): Promise<void>;
}

/**
 * Boots a service: env → logger → Postgres (database, schema, migrations) →
 * NATS (streams) → outbox relay → consumers → HTTP. Dependencies that are not
 * up yet are waited for, not fatal. `npm start`, Kubernetes and the
 * integration tests all start services through here. As a process's main (`installSignalHandlers`), a start that
 * fails (its HTTP port taken, a migration refused) ends the process with exit code 1, so that its supervisor (`npm
 * start`, Kubernetes) starts it again; it used to stay up without a listener.
 */
export async function startService<S extends z.ZodRawShape>(
  def: ServiceDefinition<S>,
  rawEnv: NodeJS.ProcessEnv = process.env,
  opts: { exitOnConfigError?: boolean; installSignalHandlers?: boolean } = {},
): Promise<RunningService<ServiceEnv<S>>> {
  try {
    return await boot(def, rawEnv, opts);
  } catch (err) {
    if (!opts.installSignalHandlers) throw err;
    process.stderr.write(`${JSON.stringify({ level: "fatal", service: def.name, err: (err as Error).message, msg: "service could not start; exiting" })}\n`);
    process.exit(1);
  }
}

async function boot<S extends z.ZodRawShape>(
  def: ServiceDefinition<S>,
  rawEnv: NodeJS.ProcessEnv,
  opts: { exitOnConfigError?: boolean; installSignalHandlers?: boolean },
): Promise<RunningService<ServiceEnv<S>>> {
  const schema = z.object({ ...internalServiceEnv, ...def.env });
  const env = parseEnv(schema, rawEnv, { exitOnError: opts.exitOnConfigError ?? true, service: def.name }) as unknown as ServiceEnv<S>;
  const log = createLogger(def.name, env.LOG_LEVEL);
  const lifecycle = new Lifecycle(log);
  if (opts.installSignalHandlers) lifecycle.installSignalHandlers();
  // OpenTelemetry when an OTLP endpoint is configured (off otherwise); registered first, so stopped last.
  const tracing = startTracing(def.name, rawEnv, log);
  lifecycle.onStop("tracing", () => tracing.shutdown());

  const db = await waitFor(
    "postgres",
    () => openDatabase({ url: env.DATABASE_URL, schema: def.schema, entities: def.entities, migrations: def.migrations, applicationName: def.name }),
    log,
  );
  lifecycle.onStop("postgres", () => db.destroy());
  const bus = await waitFor("nats", () => Bus.connect({ url: env.NATS_URL, namespace: env.BUS_NAMESPACE, name: def.name, log, streamReplicas: env.BUS_STREAM_REPLICAS }), log);
  lifecycle.onStop("nats", () => bus.close());
  await waitFor("jetstream streams", () => bus.ensureStreams(), log);

  // Requests in flight, and when the last one ended: the consumers step back only while there are requests to protect.
  // `lastHeard`: when another process last said it serves HTTP requests (`bcast.load.serving.v1`).
  const serving = { inFlight: 0, lastEnded: 0, lastAnnounced: 0, lastHeard: 0 };
  const servingHttp = () => serving.inFlight > 0 || Date.now() - serving.lastEnded < 1_000;
  bus.onBroadcast(SUBJECTS.loadServing, () => (serving.lastHeard = Date.now()));
  const gate = new LoadGate({
    lagMs: env.CONSUMER_YIELD_LAG_MS,
    waiting: () => poolWaiting(db),
    // HTTP requests, and the request/reply questions other services ask this one (the send path's opt-out check).
    serving: () => servingHttp() || bus.servingRequests(1_000),
    interactive: () => servingHttp() || Date.now() - serving.lastHeard < 1_000,
    cpuPressure: env.CONSUMER_YIELD_CPU_PRESSURE > 0 ? cpuPressureReader() : undefined,
    pressureShare: env.CONSUMER_YIELD_CPU_PRESSURE,
  });
  bus.setLoadGate(gate);
  lifecycle.onStop("load gate", () => gate.stop());

  const metrics = createMetrics(def.name);
  instrumentBus(metrics, bus);
  const deps: ServiceDeps<ServiceEnv<S>> = { env, log, db, bus, metrics, schema: def.schema };

  if (def.outbox !== false) {
    const relay = new OutboxRelay({ databaseUrl: env.DATABASE_URL, schema: def.schema, bus, log });
    relay.start();
    instrumentOutbox(metrics, def.schema, relay);
    lifecycle.onStop("outbox relay", () => relay.stop());
  }
  const closers = (await def.start?.(deps)) ?? [];
  for (const close of closers) lifecycle.onStop("worker", close);

  const handler = createServiceHandler({
    service: def.name,
    log,
    internalToken: env.INTERNAL_TOKEN,
    readiness: { postgres: () => pingDatabase(db), nats: () => bus.ping() },
    routes: def.routes(deps),
    jsonRoutes: def.jsonRoutes?.(deps),
    largeBodies: def.largeBodies,
    metrics,
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = createHttpServer((req, res) => {
      // Probes and scrapes are not the requests the gate protects.
      if (!PROBE_PATH.test(req.url ?? "")) {
        serving.inFlight++;
        const now = Date.now();
        if (now - serving.lastAnnounced >= SERVING_ANNOUNCE_MS) {
          serving.lastAnnounced = now;
          bus.broadcast(SUBJECTS.loadServing, { service: def.name });
        }
        res.once("close", () => {
          serving.inFlight--;
          serving.lastEnded = Date.now();
        });
      }
      handler(req, res);
    });
    s.once("error", reject);
    s.listen(env.PORT, env.HOST, () => resolve(s));
  });
  server.keepAliveTimeout = 65_000;
  lifecycle.onStop("http", () => drainHttpServer(server));
  const port = (server.address() as AddressInfo).port;
  log.info({ port }, "service listening");
  return { deps, url: `http://127.0.0.1:${port}`, port, server, loadGate: gate, stop: () => lifecycle.stop() };
}
