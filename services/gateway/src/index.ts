import type { Server } from "node:http";
import { Bus } from "@platform/bus";
import { parseEnv } from "@platform/config";
import { openDatabase } from "@platform/db";
import { createHttpServer, drainHttpServer } from "@platform/http";
import { createLogger } from "@platform/logging";
import { Lifecycle, waitFor } from "@platform/runtime";
import { startTracing } from "@platform/telemetry";
import { createGateway } from "./service";
import { definitionEntities, definitionMigrations, SCHEMA } from "./db/definition";
import { envSchema } from "./env";

async function main(): Promise<void> {
  const env = parseEnv(envSchema, process.env, { service: "gateway" });
  const log = createLogger("gateway", env.LOG_LEVEL);
  const lifecycle = new Lifecycle(log);
  lifecycle.installSignalHandlers();
  // Registered first, so stopped last: spans of the requests finished while draining are still exported.
  const tracing = startTracing("gateway", process.env, log);
  lifecycle.onStop("tracing", () => tracing.shutdown());

  const db = await waitFor(
    "postgres",
    () => openDatabase({ url: env.DATABASE_URL, schema: SCHEMA, entities: definitionEntities, migrations: definitionMigrations, applicationName: "gateway", poolSize: 20 }),
    log,
  );
  lifecycle.onStop("postgres", () => db.destroy());
  const bus = await waitFor("nats", () => Bus.connect({ url: env.NATS_URL, namespace: env.BUS_NAMESPACE, name: "gateway", log, streamReplicas: env.BUS_STREAM_REPLICAS }), log);
  lifecycle.onStop("nats", () => bus.close());
  await waitFor("jetstream streams", () => bus.ensureStreams(), log);

  const gateway = createGateway({ env, log, db, bus });
  lifecycle.onStop("gateway", () => gateway.stop());
  const server: Server = await new Promise((resolve, reject) => {
    const s = createHttpServer(gateway.listener).listen(env.PORT, env.HOST, () => resolve(s));
    s.once("error", reject);
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  lifecycle.onStop("http", () => drainHttpServer(server));
  log.info({ port: env.PORT }, "gateway listening");
}

main().catch((err) => {
  process.stderr.write(`gateway failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
