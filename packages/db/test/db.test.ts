import { expect } from "chai";
import type { MigrationInterface, QueryRunner } from "typeorm";
import { dropDatabase, randomSuffix } from "@platform/testing";
import { ensureDatabase, openDatabase, pingDatabase } from "../src";

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
});
