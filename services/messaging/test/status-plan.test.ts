import { expect } from "chai";
import type { DataSource } from "typeorm";
import { bulkTransaction, openDatabase } from "@platform/db";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { messagesRepository } from "../src/db/repositories/messages.repository";
import { definition } from "../src/service";

/**
 * The status batch reads only the rows it names, whatever the planner's
 * statistics say. Statistics taken while the table held inbound rows only
 * (the table analysed after an inbound burst, before the outbound sends)
 * made the planner walk the whole outbound partial index as a filter for
 * every batch (issue 12's bench: 7.7 ms per status batch, growing with the
 * table). Its own database: the test sets the table's statistics.
 */
describe("status batch under stale statistics", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("stplan");
    ds = await openDatabase({ url: env.databaseUrl, schema: "messaging", entities: definition.entities, migrations: definition.migrations, poolSize: 2 });
  });
  after(async () => {
    await ds?.destroy();
    await env?.cleanup();
  });

  it("reads the named messages through their indexes, not every outbound row", async function () {
    this.timeout(60_000);
    const cols = `id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, status, provider_message_id`;
    await ds.query(`ALTER TABLE messaging.messages SET (autovacuum_enabled = false)`);
    await ds.query(
      `INSERT INTO messaging.messages (${cols})
       SELECT 'in' || n, 'org', 'ch', 'conv', 'ct', '+1555', 'inbound', 'text', 'received', 'wamid.in.' || n FROM generate_series(1, 3000) n`,
    );
    await ds.query(`ANALYZE messaging.messages`);
    await ds.query(
      `INSERT INTO messaging.messages (${cols})
       SELECT 'out' || n, 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'sent', 'wamid.out.' || n FROM generate_series(1, 3000) n`,
    );

    const named = [17, 500, 1234, 2999, 3000];
    const { changed, indexReads } = await bulkTransaction(ds, async (tx) => {
      const changed = await messagesRepository.applyStatusBatch(
        tx,
        "ch",
        named.map((n) => ({ ourId: null, providerMessageId: `wamid.out.${n}`, status: "delivered", errorCode: null, errorTitle: null })),
      );
      const [{ reads }] = await tx.query(
        `SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)::int AS reads FROM pg_index WHERE indrelid = 'messaging.messages'::regclass`,
      );
      return { changed, indexReads: reads as number };
    });

    expect(changed.map((r) => r.id).sort()).to.deep.equal(named.map((n) => `out${n}`).sort());
    expect(changed.every((r) => r.status === "delivered" && r.old_status === "sent")).to.equal(true);
    // A few index entries per named message (its provider id, its primary key, the row's update), never the table.
    expect(indexReads).to.be.lessThan(100);
  });
});
