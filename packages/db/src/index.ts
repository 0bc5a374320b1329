import "reflect-metadata";
import { Client, Pool, type PoolClient, type PoolConfig, type QueryResultRow } from "pg";
import { DataSource, QueryFailedError, type EntitySchema, type MixedList } from "typeorm";

export { DataSource } from "typeorm";
export type { EntityManager } from "typeorm";

/** SQLSTATEs of a lost race to create the same database or schema: someone else made it, which is fine. */
const ALREADY_EXISTS = new Set(["42P04", "42P06", "23505"]);

/** `CREATE DATABASE` when it does not exist yet (connects to the server's `postgres` database to do it). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, "")) || "postgres";
  const admin = new URL(databaseUrl);
  admin.pathname = "/postgres";
  const client = new Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
      } catch (err) {
        if (!ALREADY_EXISTS.has((err as { code?: string }).code ?? "")) throw err;
      }
    }
  } finally {
    await client.end();
  }
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export interface DatabaseOptions {
  url: string;
  /** The service's own schema; its tables and its `migrations` table live there. */
  schema: string;
  entities: MixedList<Function | string | EntitySchema>;
  /** Migration classes (not globs: a glob breaks between ts-node and the build). */
  migrations: MixedList<Function>;
  poolSize?: number;
  applicationName?: string;
}

/**
 * Every connection of a service plans each execution with its parameters and the tables as they are now
 * (`plan_cache_mode=force_custom_plan`); named prepared statements still save the parse. A generic plan is made once
 * per connection from the statistics of that moment and kept: made while a table was nearly empty (a fresh database,
 * a queue table between bursts), it kept sequential scans as the table grew. In the 50,000-recipient bench, the
 * batched `sent` mark scanned the whole messages table (16 ms per batch of 20), and the outbox relay's delete the
 * whole outbox. Planning costs about 15 µs for a one-row statement and 0.2 ms for a batched one (pgbench, this VM).
 */
export const CONNECTION_OPTIONS = "-c plan_cache_mode=force_custom_plan";

export function createDataSource(opts: DatabaseOptions): DataSource {
  return new DataSource({
    type: "postgres",
    url: opts.url,
    schema: opts.schema,
    entities: opts.entities,
    migrations: opts.migrations,
    migrationsTableName: "migrations",
    migrationsRun: false,
    synchronize: false,
    logging: false,
    applicationName: opts.applicationName ?? opts.schema,
    extra: { max: opts.poolSize ?? 10, connectionTimeoutMillis: 5_000, idleTimeoutMillis: 30_000, options: CONNECTION_OPTIONS },
  });
}

/**
 * Creates the database and schema when missing, connects, and runs pending
 * migrations under an advisory lock, so replicas starting together migrate once.
 */
export async function openDatabase(opts: DatabaseOptions): Promise<DataSource> {
  await ensureDatabase(opts.url);
  const ds = createDataSource(opts);
  await ds.initialize();
  try {
    const runner = ds.createQueryRunner();
    await runner.connect();
    try {
      await runner.query("SELECT pg_advisory_lock(hashtext($1))", [`migrations:${opts.schema}`]);
      try {
        // A role limited to its own schema (created for it beforehand, as in k8s/) may not CREATE on the database,
        // and Postgres checks that privilege even for CREATE SCHEMA IF NOT EXISTS: only create a missing schema.
        const found = await runner.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [opts.schema]);
        if (found.length === 0) await runner.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(opts.schema)}`);
        await ds.runMigrations({ transaction: "each" });
      } finally {
        await runner.query("SELECT pg_advisory_unlock(hashtext($1))", [`migrations:${opts.schema}`]);
      }
    } finally {
      await runner.release();
    }
  } catch (err) {
    await ds.destroy().catch(() => undefined);
    throw err;
  }
  return ds;
}

/** Readiness: one round trip. */
export async function pingDatabase(ds: DataSource): Promise<void> {
  if (!ds.isInitialized) throw new Error("not connected");
  await ds.query("SELECT 1");
}

/** ISO 8601 UTC with milliseconds, as every API timestamp. */
export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

/** SQLSTATE of an error thrown by pg through TypeORM. */
export function sqlState(err: unknown): string | undefined {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e?.driverError?.code ?? e?.code;
}
export const UNIQUE_VIOLATION = "23505";

/** Anything that runs raw SQL: a DataSource, or a transaction's EntityManager. */
export interface SqlRunner {
  query(sql: string, params?: unknown[]): Promise<any>;
}

/**
 * A pool of the DataSource's own for one kind of statement (`<applicationName>:<kind>` in `pg_stat_activity`), made on
 * first use and ended with the DataSource.
 */
function ownPool(ds: DataSource, pools: WeakMap<DataSource, Pool>, kind: string, config: PoolConfig): Pool {
  const existing = pools.get(ds);
  if (existing) return existing;
  const opts = ds.options as { url?: string; applicationName?: string };
  const pool = new Pool({
    connectionString: opts.url,
    application_name: `${opts.applicationName ?? "service"}:${kind}`,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    ...config,
  });
  // An idle connection dropped by the server (restart, database dropped) is replaced on next use.
  pool.on("error", () => undefined);
  pools.set(ds, pool);
  const destroy = ds.destroy.bind(ds);
  ds.destroy = async () => {
    pools.delete(ds);
    await pool.end().catch(() => undefined);
    return destroy();
  };
  return pool;
}

const hotPools = new WeakMap<DataSource, Pool>();

/**
 * The DataSource's pool for hot prepared statements: a few connections of
 * its own, so the send path's statements never queue behind TypeORM's pool.
 * Each statement is parsed once per connection and planned per execution
 * (`CONNECTION_OPTIONS`). Ended with the DataSource.
 */
function hotPoolOf(ds: DataSource): Pool {
  return ownPool(ds, hotPools, "hot", { max: 4, options: CONNECTION_OPTIONS });
}

/**
 * Queries waiting for a connection of the pools that requests use (TypeORM's and the hot one), for load shedding.
 * The bulk pool is left out: only background consumers wait there, and they are what the shedding holds back.
 */
export function poolWaiting(ds: DataSource): number {
  const main = (ds.driver as unknown as { master?: { waitingCount?: number } }).master;
  return (main?.waitingCount ?? 0) + (hotPools.get(ds)?.waitingCount ?? 0);
}

/**
 * Settings of the bulk pool's connections (ADR 0013). Its statements are the pipeline's set-based writes: each reads
 * its tables only through a key it is given (`= ANY($n)`, `unnest` joined on a primary or unique key), so ONE plan
 * fits every call, and planning it per execution cost a third of Postgres's time on the inbound and status paths
 * (`pg_stat_statements`: 0.2 to 0.45 ms per call for the large CTEs). So a statement is planned once per connection
 * (`force_generic_plan`) with sequential scans off: a plan made while a table was nearly empty (where a sequential
 * scan is the cheapest) still probes its index per key once the table has millions of rows. Hash joins stay allowed
 * (between the statement's own CTEs they are the right choice for large groups). Connections are replaced every
 * `BULK_CONNECTION_LIFETIME_S`, so their plans are made again from the tables as they are.
 */
export const BULK_CONNECTION_OPTIONS = "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off";
const BULK_CONNECTION_LIFETIME_S = 60;
const BULK_POOL_SIZE = 4;

const bulkPools = new WeakMap<DataSource, Pool>();

/** The DataSource's bulk pool (`BULK_CONNECTION_OPTIONS`), made on first use and ended with the DataSource. */
function bulkPoolOf(ds: DataSource): Pool {
  return ownPool(ds, bulkPools, "bulk", { max: BULK_POOL_SIZE, options: BULK_CONNECTION_OPTIONS, maxLifetimeSeconds: BULK_CONNECTION_LIFETIME_S });
}

/**
 * The rows of a pg query, its failure reported as TypeORM reports one (`QueryFailedError`, the SQLSTATE in `code` and
 * `driverError.code`), so callers read it with `sqlState` whichever pool ran it.
 */
async function rowsAsTypeOrm<T>(text: string, values: unknown[] | undefined, run: () => Promise<{ rows: T[] }>): Promise<T[]> {
  try {
    return (await run()).rows;
  } catch (err) {
    throw new QueryFailedError(text, values, err as Error);
  }
}

/** A transaction on a bulk pool connection (`bulkTransaction`): raw SQL like an EntityManager, errors as TypeORM's. */
export class BulkTransaction implements SqlRunner {
  constructor(readonly client: PoolClient) {}

  query(sql: string, params?: unknown[]): Promise<any[]> {
    return rowsAsTypeOrm(sql, params, () => this.client.query(sql, params));
  }

  prepared<T>(name: string, text: string, values: unknown[]): Promise<T[]> {
    return rowsAsTypeOrm(text, values, () => this.client.query<T & QueryResultRow>({ name, text, values }));
  }
}

/**
 * Runs `fn` in one transaction on a connection of the DataSource's bulk pool: BEGIN, `fn`, COMMIT (ROLLBACK and
 * rethrow when it fails). Statements given `tx` are planned as `BULK_CONNECTION_OPTIONS` says, the named ones
 * (`queryPrepared`, `queryBulk`) once per connection.
 */
export async function bulkTransaction<T>(ds: DataSource, fn: (tx: BulkTransaction) => Promise<T>): Promise<T> {
  const client = await bulkPoolOf(ds).connect();
  let broken: Error | undefined;
  // The pool listens for errors of idle connections only: one lost while it is ours (the server restarted between two
  // statements) would otherwise be an unhandled 'error' event, which ends the process.
  const lost = (err: Error) => (broken = err);
  client.on("error", lost);
  try {
    await client.query("BEGIN");
    const result = await fn(new BulkTransaction(client));
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.removeListener("error", lost);
    // A connection lost, or whose transaction could not be ended, is not given to anyone else.
    client.release(broken);
  }
}

/**
 * A pipeline statement (`BULK_CONNECTION_OPTIONS`): given the DataSource, on its bulk pool; given a `bulkTransaction`,
 * on that transaction's connection. A named prepared statement either way: one name, one text.
 */
export async function queryBulk<T = any>(q: DataSource | BulkTransaction, name: string, text: string, values: unknown[]): Promise<T[]> {
  if (q instanceof BulkTransaction) return q.prepared<T>(name, text, values);
  return rowsAsTypeOrm(text, values, () => bulkPoolOf(q).query<T & QueryResultRow>({ name, text, values }));
}

/**
 * A hot statement, parsed once per connection (a named prepared statement):
 * outside a transaction on the DataSource's hot pool; inside a transaction
 * (a TypeORM EntityManager with its query runner) on the transaction's own
 * connection (planned per execution, `CONNECTION_OPTIONS`); inside a
 * `bulkTransaction` on its connection (planned once, `BULK_CONNECTION_OPTIONS`).
 * One name, one text.
 */
export async function queryPrepared<T = any>(q: SqlRunner, name: string, text: string, values: unknown[]): Promise<T[]> {
  if (q instanceof BulkTransaction) return q.prepared<T>(name, text, values);
  if (q instanceof DataSource || (q as { driver?: unknown }).driver) {
    return (await hotPoolOf(q as DataSource).query({ name, text, values })).rows as T[];
  }
  const runner = (q as { queryRunner?: { databaseConnection?: unknown; isReleased?: boolean } }).queryRunner;
  const client = runner?.databaseConnection as { query?: (config: { name: string; text: string; values: unknown[] }) => Promise<{ rows: T[] }> } | undefined;
  if (client && typeof client.query === "function" && !runner!.isReleased) {
    return rowsAsTypeOrm(text, values, () => client.query!({ name, text, values }));
  }
  return rowsOf<T>(await q.query(text, values));
}

/**
 * The rows of a raw TypeORM query: its postgres driver answers UPDATE and
 * DELETE (also inside a WITH) with `[rows, rowCount]` and everything else
 * with the rows.
 */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === "number") return result[0] as T[];
  return result as T[];
}

/**
 * Replaces a column's check constraint `name` of `table` (schema-qualified, quoted) with `check`, for a migration.
 * Added `NOT VALID` (no scan under the table's lock) and validated after (a scan that lets writes go on), so widening
 * a check on a big table does not stop its writers.
 */
export async function replaceCheckConstraint(q: { query(sql: string): Promise<unknown> }, table: string, name: string, check: string): Promise<void> {
  await q.query(`ALTER TABLE ${table} DROP CONSTRAINT ${quoteIdent(name)}`);
  await q.query(`ALTER TABLE ${table} ADD CONSTRAINT ${quoteIdent(name)} CHECK (${check}) NOT VALID`);
  await q.query(`ALTER TABLE ${table} VALIDATE CONSTRAINT ${quoteIdent(name)}`);
}
