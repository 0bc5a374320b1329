import { expect } from "chai";
import type { MigrationInterface, QueryRunner } from "typeorm";
import { dropDatabase, randomSuffix } from "@platform/testing";
import { bulkTransaction, createDataSource, ensureDatabase, openDatabase, pingDatabase, queryBulk, queryPrepared, sqlState } from "../src";

class CreateThings1700000000000 implements MigrationInterface {
  name = "CreateThings1700000000000";
  async up(q: QueryRunner) {
    await q.query(`CREATE TABLE dbtest.things (id int PRIMARY KEY)`);
    await q.query(`INSERT INTO dbtest.things VALUES (1)`);
  }
  async down(q: QueryRunner) {
    await q.query(`DROP TABLE dbtest.things`);
  }
}

describe("db", () => {
  const base = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const url = Object.assign(new URL(base), { pathname: `/dbtest_${randomSuffix()}` }).toString();
  after(() => dropDatabase(url));

  it("creates the database once, even when asked concurrently", async () => {
    await Promise.all([ensureDatabase(url), ensureDatabase(url), ensureDatabase(url)]);
  });

  it("creates the schema and runs each migration once when replicas start together", async () => {
    const opts = { url, schema: "dbtest", entities: [], migrations: [CreateThings1700000000000] };
    const sources = await Promise.all([openDatabase(opts), openDatabase(opts), openDatabase(opts)]);
    const rows = await sources[0].query(`SELECT count(*)::int AS n FROM dbtest.things`);
    expect(rows[0].n).to.equal(1);
    const migrations = await sources[0].query(`SELECT count(*)::int AS n FROM dbtest.migrations`);
    expect(migrations[0].n).to.equal(1);
    await pingDatabase(sources[0]);
    await Promise.all(sources.map((s) => s.destroy()));
  });

  it("plans a hot statement per execution: prepared while its table was nearly empty, it uses the index once the table has grown", async () => {
    await ensureDatabase(url);
    const ds = await createDataSource({ url, schema: "public", entities: [], migrations: [], poolSize: 1, applicationName: "dbtest-plans" }).initialize();
    try {
      await ds.query(`CREATE SCHEMA IF NOT EXISTS dbtest; DROP TABLE IF EXISTS dbtest.growing; CREATE TABLE dbtest.growing (id text PRIMARY KEY, v int NOT NULL)`);
      await ds.query(`INSERT INTO dbtest.growing VALUES ('a', 1)`);
      const mark = `UPDATE dbtest.growing g SET v = g.v + 1 FROM unnest($1::text[]) AS s(id) WHERE g.id = s.id RETURNING g.id`;
      for (let i = 0; i < 6; i++) await queryPrepared(ds, "dbtest.mark", mark, [["a"]]);
      // The table grows 30,000-fold; no ANALYZE runs (as while a bulk job fills a fresh table faster than autovacuum looks).
      await ds.query(`INSERT INTO dbtest.growing SELECT 'k' || g, 0 FROM generate_series(1, 30000) g`);
      expect(await queryPrepared(ds, "dbtest.mark", mark, [["k7", "k9"]])).to.have.length(2);
      const [plan] = await queryPrepared<{ "QUERY PLAN": unknown }>(ds, "dbtest.explain", `EXPLAIN (FORMAT JSON) EXECUTE "dbtest.mark"('{k7,k9}')`, []);
      const text = JSON.stringify(plan["QUERY PLAN"]);
      expect(text, text).to.include("growing_pkey");
      expect(text).not.to.include("Seq Scan");
      const [stmt] = await queryPrepared(ds, "dbtest.plans", `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, ["dbtest.mark"]);
      expect(stmt).to.deep.equal({ generic_plans: "0", custom_plans: "8" });
    } finally {
      await ds.query(`DROP TABLE IF EXISTS dbtest.growing`).catch(() => undefined);
      await ds.destroy();
    }
  });

  it("plans a bulk statement once, and that plan probes the index by key however small the table was when it was made", async () => {
    await ensureDatabase(url);
    const ds = await createDataSource({ url, schema: "public", entities: [], migrations: [], poolSize: 1, applicationName: "dbtest-bulk-plans" }).initialize();
    try {
      await ds.query(`CREATE SCHEMA IF NOT EXISTS dbtest; DROP TABLE IF EXISTS dbtest.bulk_growing; CREATE TABLE dbtest.bulk_growing (id text PRIMARY KEY, v int NOT NULL)`);
      await ds.query(`INSERT INTO dbtest.bulk_growing VALUES ('a', 1)`);
      await ds.query(`ANALYZE dbtest.bulk_growing`);
      const mark = `UPDATE dbtest.bulk_growing g SET v = g.v + 1 FROM unnest($1::text[]) AS s(id) WHERE g.id = s.id RETURNING g.id`;
      // One transaction, so every statement runs on one connection of the bulk pool: the plan made on the one-row table is the one kept.
      const { plan, plans } = await bulkTransaction(ds, async (tx) => {
        for (let i = 0; i < 3; i++) await queryBulk(tx, "dbtest.bulk-mark", mark, [["a"]]);
        // The table grows 30,000-fold; no ANALYZE runs (a fresh table filled by a bulk job faster than autovacuum looks).
        await tx.query(`INSERT INTO dbtest.bulk_growing SELECT 'k' || g, 0 FROM generate_series(1, 30000) g`);
        expect(await queryBulk(tx, "dbtest.bulk-mark", mark, [["k7", "k9"]])).to.have.length(2);
        const [explained] = await tx.query(`EXPLAIN (FORMAT JSON) EXECUTE "dbtest.bulk-mark"('{k7,k9}')`);
        const [stmt] = await tx.query(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'dbtest.bulk-mark'`);
        return { plan: JSON.stringify(explained["QUERY PLAN"]), plans: stmt };
      });
      expect(plan, plan).to.include("bulk_growing_pkey");
      expect(plan, plan).to.include("Nested Loop");
      expect(plan).not.to.include("Seq Scan");
      // Planned once (generic), never per execution.
      expect(plans).to.deep.equal({ generic_plans: "5", custom_plans: "0" });
    } finally {
      await ds.query(`DROP TABLE IF EXISTS dbtest.bulk_growing`).catch(() => undefined);
      await ds.destroy();
    }
  });

  it("runs a bulk transaction on a pool of its own: committed, rolled back on failure with TypeORM's error shape, the pool ended with its DataSource", async () => {
    await ensureDatabase(url);
    const ds = await createDataSource({ url, schema: "public", entities: [], migrations: [], poolSize: 1, applicationName: "dbtest-bulk" }).initialize();
    try {
      await ds.query(`CREATE SCHEMA IF NOT EXISTS dbtest; DROP TABLE IF EXISTS dbtest.bulk_rows; CREATE TABLE dbtest.bulk_rows (id int PRIMARY KEY)`);
      const insert = `INSERT INTO dbtest.bulk_rows SELECT unnest($1::int[]) RETURNING id`;
      const committed = await bulkTransaction(ds, async (tx) => {
        const [own] = await tx.query(`SELECT current_setting('application_name') AS app, current_setting('plan_cache_mode') AS mode`);
        expect(own).to.deep.equal({ app: "dbtest-bulk:bulk", mode: "force_generic_plan" });
        return queryBulk(tx, "dbtest.bulk-insert", insert, [[1, 2]]);
      });
      expect(committed).to.deep.equal([{ id: 1 }, { id: 2 }]);
      // A failure inside rolls the whole transaction back and reports the SQLSTATE as TypeORM's errors do.
      const failed = await bulkTransaction(ds, async (tx) => {
        await queryPrepared(tx, "dbtest.bulk-insert", insert, [[3]]);
        await queryBulk(tx, "dbtest.bulk-insert", insert, [[1]]);
      }).catch((err: unknown) => err);
      expect(sqlState(failed)).to.equal("23505");
      expect((failed as { driverError?: { code?: string } }).driverError?.code).to.equal("23505");
      expect(await ds.query(`SELECT id FROM dbtest.bulk_rows ORDER BY id`)).to.deep.equal([{ id: 1 }, { id: 2 }]);
      // Outside a transaction: on the bulk pool too, with the same settings.
      const [mode] = await queryBulk(ds, "dbtest.bulk-mode", `SELECT current_setting('enable_seqscan') AS seqscan, current_setting('application_name') AS app, $1::int AS n`, [1]);
      expect(mode).to.deep.equal({ seqscan: "off", app: "dbtest-bulk:bulk", n: 1 });
    } finally {
      await ds.query(`DROP TABLE IF EXISTS dbtest.bulk_rows`).catch(() => undefined);
      await ds.destroy();
    }
    const check = await createDataSource({ url, schema: "public", entities: [], migrations: [] }).initialize();
    try {
      const rows = await check.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'dbtest-bulk:bulk'`);
      expect(rows[0].n, "the bulk pool ends with its DataSource").to.equal(0);
    } finally {
      await check.destroy();
    }
  });

  it("a bulk transaction whose connection the server ends between two statements fails, the process lives on and the pool serves the next", async () => {
    await ensureDatabase(url);
    const ds = await createDataSource({ url, schema: "public", entities: [], migrations: [], poolSize: 1, applicationName: "dbtest-bulk-lost" }).initialize();
    try {
      const failed = await bulkTransaction(ds, async (tx) => {
        const [{ pid }] = await tx.query(`SELECT pg_backend_pid() AS pid`);
        // The connection hears it is gone while no query of ours runs: its 'error' event, then 'end'.
        const ended = new Promise<void>((resolve) => tx.client.once("end", () => resolve()));
        await ds.query(`SELECT pg_terminate_backend($1)`, [pid]);
        await Promise.race([ended, new Promise((r) => setTimeout(r, 5_000))]);
        await tx.query(`SELECT 1`);
      }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failed, "the transaction reports the lost connection").to.be.instanceOf(Error);
      expect(await bulkTransaction(ds, (tx) => tx.query(`SELECT 2 AS n`))).to.deep.equal([{ n: 2 }]);
    } finally {
      await ds.destroy();
    }
  });

  it("runs hot statements prepared, planned per execution, on a pool of their own; inside a transaction prepared on its connection", async () => {
    await ensureDatabase(url);
    const ds = await createDataSource({ url, schema: "public", entities: [], migrations: [], poolSize: 1, applicationName: "dbtest-hot" }).initialize();
    try {
      await ds.query(`CREATE SCHEMA IF NOT EXISTS dbtest; CREATE TABLE IF NOT EXISTS dbtest.counters (id int PRIMARY KEY)`);
      await ds.query(`INSERT INTO dbtest.counters VALUES (1)`);
      const bump = `UPDATE dbtest.counters SET id = id + $1 RETURNING id`;
      expect(await queryPrepared(ds, "dbtest.bump", bump, [1])).to.deep.equal([{ id: 2 }]);
      expect(await queryPrepared(ds, "dbtest.bump", bump, [1])).to.deep.equal([{ id: 3 }]);
      // Sequential calls reuse the hot pool's last connection: the statement is there, parsed once, planned per call.
      const [stmt] = await queryPrepared(ds, "dbtest.prepared", `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, ["dbtest.bump"]);
      expect(stmt).to.deep.equal({ name: "dbtest.bump", generic_plans: "0", custom_plans: "2" });
      // TypeORM's own pool too: a statement prepared inside a transaction never settles on a generic plan.
      expect((await ds.query(`SHOW plan_cache_mode`))[0].plan_cache_mode).to.equal("force_custom_plan");
      const inTx = await ds.transaction((tx) => queryPrepared(tx, "dbtest.bump", bump, [-2]));
      expect(inTx).to.deep.equal([{ id: 1 }]);
      // Inside a transaction: prepared on the transaction's own connection, part of the transaction (a rollback undoes it).
      const seen = await ds
        .transaction(async (tx) => {
          await queryPrepared(tx, "dbtest.bump", bump, [10]);
          await queryPrepared(tx, "dbtest.bump", bump, [10]);
          const [own] = await tx.query(`SELECT name FROM pg_prepared_statements WHERE name = 'dbtest.bump'`);
          const [row] = await tx.query(`SELECT id FROM dbtest.counters`);
          throw Object.assign(new Error("roll back"), { seen: { prepared: own?.name, id: row.id } });
        })
        .catch((err: { seen?: unknown }) => err.seen);
      expect(seen).to.deep.equal({ prepared: "dbtest.bump", id: 21 });
      expect((await ds.query(`SELECT id FROM dbtest.counters`))[0].id).to.equal(1);
      // A failing prepared statement inside a transaction reports its SQLSTATE as TypeORM's errors do.
      const failed = await ds
        .transaction((tx) => queryPrepared(tx, "dbtest.duplicate", `INSERT INTO dbtest.counters VALUES ($1)`, [1]))
        .catch((err: { code?: string; driverError?: { code?: string } }) => err);
      expect((failed as { code?: string }).code).to.equal("23505");
      expect((failed as { driverError?: { code?: string } }).driverError?.code).to.equal("23505");
    } finally {
      await ds.destroy();
    }
    const check = await createDataSource({ url, schema: "public", entities: [], migrations: [] }).initialize();
    try {
      const rows = await check.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'dbtest-hot:hot'`);
      expect(rows[0].n, "the hot pool ends with its DataSource").to.equal(0);
    } finally {
      await check.destroy();
    }
  });
});
