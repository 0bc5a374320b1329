import { expect } from "chai";
import { Client, type PoolClient } from "pg";
import type { DataSource } from "typeorm";
import { BULK_CONNECTION_OPTIONS, BulkTransaction, openDatabase } from "@platform/db";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { ContactsRepository } from "../src/db/repositories/contacts.repository";
import { definition } from "../src/service";

/**
 * An inbound batch's contacts are read through the (organization, phone)
 * key, whatever the planner's statistics say. Statistics taken while the
 * organization had few contacts made the planner read all of its contacts
 * (its created-at index) and sort them, twice per batch (issue 12's bench:
 * 1,000 rows per resolve-many of ten numbers, growing with the organization).
 * Its own database: the test sets the table's statistics.
 */
describe("resolve-many with names under stale statistics", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  let client: Client;
  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("ctplan");
    ds = await openDatabase({ url: env.databaseUrl, schema: "contacts", entities: definition.entities, migrations: definition.migrations, poolSize: 2 });
    // Planned as the bulk pool plans (once, no sequential scan), where the repository runs it (ADR 0013).
    client = new Client({ connectionString: env.databaseUrl, options: BULK_CONNECTION_OPTIONS });
    await client.connect();
  });
  after(async () => {
    await client?.end();
    await ds?.destroy();
    await env?.cleanup();
  });

  it("reads the named numbers through their key, not every contact of the organization", async function () {
    this.timeout(60_000);
    await client.query(`ALTER TABLE contacts.contacts SET (autovacuum_enabled = false)`);
    await client.query(`ANALYZE contacts.contacts`);
    await client.query(
      `INSERT INTO contacts.contacts (id, organization_id, phone, name, wa_id)
       SELECT 'ct' || n, 'org_a', '+1555' || lpad(n::text, 7, '0'), 'Name ' || n, '1555' || lpad(n::text, 7, '0') FROM generate_series(1, 3000) n`,
    );
    // The repository's statements on this one connection, in one transaction, so its index reads can be counted.
    const repo = new ContactsRepository(new BulkTransaction(client as unknown as PoolClient) as unknown as DataSource);
    await client.query("BEGIN");
    try {
      const known = [17, 500, 2999].map((n) => `+1555${String(n).padStart(7, "0")}`);
      const phones = [...known, "+15559990001"];
      const names = ["Name 17", "Renamed", "Name 2999", "New"];
      const { contactIds, created } = await repo.resolveMany("org_a", phones, { names, waIds: phones.map((p) => p.slice(1)) });
      const { rows } = await client.query(
        `SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)::int AS reads FROM pg_index WHERE indrelid = 'contacts.contacts'::regclass`,
      );
      expect(contactIds.slice(0, 3)).to.deep.equal(["ct17", "ct500", "ct2999"]);
      expect(created).to.equal(1);
      const { rows: renamed } = await client.query(`SELECT name FROM contacts.contacts WHERE id = 'ct500'`);
      expect(renamed[0].name).to.equal("Renamed");
      // A few index entries per number (its key, the upsert's arbiter), never the organization's 3,000.
      expect(rows[0].reads).to.be.lessThan(100);
    } finally {
      await client.query("ROLLBACK");
    }
  });
});
