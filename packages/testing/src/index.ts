import { randomBytes } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { Client } from "pg";
import { connect } from "nats";

/**
 * Isolation for tests that use the real Postgres and NATS on the machine:
 * each run gets its own database and its own bus namespace (stream names and
 * subjects), so runs never collide, and cleans both up at the end.
 */
export const TEST_DATABASE_BASE = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const TEST_NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222";

export const randomSuffix = (bytes = 4) => randomBytes(bytes).toString("hex");

export interface TestEnvironment {
  databaseUrl: string;
  natsUrl: string;
  namespace: string;
  internalToken: string;
  /** The environment of a service booted on this run (`startService(definition, env.serviceEnv())`). */
  serviceEnv(extra?: Record<string, string>): Record<string, string>;
  cleanup(): Promise<void>;
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Runs one statement about the database of `databaseUrl`, connected to the server's `postgres` database. */
async function onServer(databaseUrl: string, sql: (quotedName: string) => string): Promise<void> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const admin = new URL(databaseUrl);
  admin.pathname = "/postgres";
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(sql(quoteIdent(name)));
  } finally {
    await client.end();
  }
}

/**
 * Takes the database of `databaseUrl` away from every client (`refuse`: new
 * connections are refused and the open ones ended), or gives it back: a real
 * database outage, for the tests of what a service answers without it.
 */
export async function setDatabaseOutage(databaseUrl: string, refuse: boolean): Promise<void> {
  await onServer(databaseUrl, (db) => `ALTER DATABASE ${db} WITH ALLOW_CONNECTIONS ${refuse ? "false" : "true"}`);
  if (!refuse) return;
  const name = new URL(databaseUrl).pathname.slice(1);
  await onServer(databaseUrl, () => `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name.replace(/'/g, "''")}' AND pid <> pg_backend_pid()`);
}

/** A fresh database and namespace for one test run (call from a root `before`, clean up in `after`). */
export async function createTestEnvironment(label = "t"): Promise<TestEnvironment> {
  const suffix = randomSuffix();
  const url = new URL(TEST_DATABASE_BASE);
  url.pathname = `/${label}_${suffix}`;
  const databaseUrl = url.toString();
  await onServer(databaseUrl, (db) => `CREATE DATABASE ${db}`);
  const namespace = `${label}_${suffix}`.toLowerCase();
  const internalToken = `test-internal-${randomSuffix(12)}`;
  return {
    databaseUrl,
    natsUrl: TEST_NATS_URL,
    namespace,
    internalToken,
    serviceEnv: (extra = {}) => ({
      DATABASE_URL: databaseUrl,
      NATS_URL: TEST_NATS_URL,
      BUS_NAMESPACE: namespace,
      INTERNAL_TOKEN: internalToken,
      PORT: "0",
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
      ...extra,
    }),
    cleanup: async () => {
      await dropDatabase(databaseUrl);
      await deleteStreams(TEST_NATS_URL, namespace);
    },
  };
}

export async function dropDatabase(databaseUrl: string): Promise<void> {
  await onServer(databaseUrl, (db) => `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
}

/** Deletes every stream of a namespace. */
export async function deleteStreams(natsUrl: string, namespace: string): Promise<void> {
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await nc.jetstreamManager();
    const prefix = `${namespace.toUpperCase()}_`;
    for await (const s of jsm.streams.list()) {
      if (s.config.name.startsWith(prefix)) await jsm.streams.delete(s.config.name);
    }
  } finally {
    await nc.close();
  }
}

/** Polls `probe` until it returns a value that is not undefined/false, or fails after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`condition not met within ${timeoutMs} ms${lastError ? `: ${(lastError as Error).message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Collects every message on a subject of the bus (core subscription, sees JetStream publishes too). */
export async function collectSubject(natsUrl: string, subject: string) {
  const nc = await connect({ servers: natsUrl });
  const received: Array<{ subject: string; data: any; headers: Record<string, string> }> = [];
  const sub = nc.subscribe(subject, {
    callback: (_err, msg) => {
      const headers: Record<string, string> = {};
      if (msg.headers) for (const [k, v] of msg.headers) headers[k] = v[0] ?? "";
      let data: unknown;
      // A payload the bus stored gzipped (near the server's max_payload) is read as published.
      const bytes = headers["Content-Encoding"] === "gzip" ? gunzipSync(msg.data) : msg.data;
      try {
        data = JSON.parse(new TextDecoder().decode(bytes));
      } catch {
        data = new TextDecoder().decode(bytes);
      }
      received.push({ subject: msg.subject, data, headers });
    },
  });
  await nc.flush();
  return {
    received,
    close: async () => {
      sub.unsubscribe();
      await nc.close();
    },
  };
}
export * from "./otlp";
