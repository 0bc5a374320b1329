import { expect } from "chai";
import type { DataSource, EntityManager } from "typeorm";
import { openDatabase } from "@platform/db";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { HotStatusUpdates1764400000000 } from "../src/db/migrations/1764400000000-HotStatusUpdates";
import { findStalledPending, messagesRepository } from "../src/db/repositories/messages.repository";
import { definition } from "../src/service";
import { countUpdates as countUpdatesOf } from "./helpers/updates";

/**
 * Status callbacks change `messages.status` in place (issue 12): no index of the
 * table reads a column a status change writes, so each change is a HOT update
 * (no new index entries), counted by the transaction's own statistics. The
 * sweeper's index (`messages_unsettled`) still finds every stalled pending
 * message. Its own database: the test writes rows by hand.
 */
describe("status changes as HOT updates", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  const cols = `id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, status, provider_message_id, attempts, lease_until, next_attempt_at, created_at`;
  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("sthot");
    ds = await openDatabase({ url: env.databaseUrl, schema: "messaging", entities: definition.entities, migrations: definition.migrations, poolSize: 2 });
  });
  after(async () => {
    await ds?.destroy();
    await env?.cleanup();
  });

  const countUpdates = <T>(work: (tx: EntityManager) => Promise<T>) => countUpdatesOf(ds, "messaging.messages", work);

  it("no index of messages reads status, updated_at or the error columns", async () => {
    const rows: Array<{ name: string; def: string }> = await ds.query(
      `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'messaging.messages'::regclass`,
    );
    expect(rows.map((r) => r.name)).to.include("messages_unsettled").and.not.include("messages_stuck");
    for (const { def } of rows) expect(def, def).not.to.match(/\b(status|updated_at|error_code|error_title)\b/);
  });

  it("sent → delivered → read changes are HOT updates, each message changed once per step", async function () {
    this.timeout(60_000);
    await ds.query(
      `INSERT INTO messaging.messages (${cols})
       SELECT 'hot' || n, 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'sent', 'wamid.hot.' || n, 1, NULL, NULL, now()
         FROM generate_series(1, 2000) n`,
    );
    // Spread over the table's pages, named by provider id (as the provider does) and by our id.
    const named = Array.from({ length: 40 }, (_, i) => 1 + i * 50);
    for (const status of ["delivered", "read"] as const) {
      const { result: changed, updated, hot } = await countUpdates((tx) =>
        messagesRepository.applyStatusBatch(
          tx,
          "ch",
          named.map((n, i) => ({ ourId: i % 2 ? `hot${n}` : null, providerMessageId: `wamid.hot.${n}`, status, errorCode: null, errorTitle: null })),
        ),
      );
      expect(changed.map((r) => r.id).sort()).to.deep.equal(named.map((n) => `hot${n}`).sort());
      expect(changed.every((r) => r.status === status)).to.equal(true);
      expect(updated).to.equal(named.length);
      expect(hot).to.equal(named.length);
    }
    // A repeat of the same callbacks (redelivery) changes nothing.
    const again = await countUpdates((tx) =>
      messagesRepository.applyStatusBatch(tx, "ch", named.map((n) => ({ ourId: null, providerMessageId: `wamid.hot.${n}`, status: "delivered", errorCode: null, errorTitle: null }))),
    );
    expect(again.result).to.have.length(0);
    expect(again.updated).to.equal(0);
  });

  it("the sweeper finds stalled pending messages: expired lease, overdue retry; not a live lease nor a settled message", async () => {
    await ds.query(
      `INSERT INTO messaging.messages (${cols}) VALUES
         ('stall-lease', 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'pending', NULL, 1, now() - interval '1 hour', NULL, now() - interval '2 hours'),
         ('stall-retry', 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'pending', NULL, 2, NULL, now() - interval '1 hour', now() - interval '2 hours'),
         ('busy-lease', 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'pending', NULL, 1, now() + interval '1 hour', NULL, now() - interval '2 hours'),
         ('late-id', 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'pending', NULL, 3, now() - interval '1 hour', NULL, now() - interval '2 hours'),
         ('settled', 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'delivered', 'wamid.settled', 1, NULL, NULL, now() - interval '2 hours')`,
    );
    const stalled = (await findStalledPending(ds, 3_000, 100)).map((m) => m.id).sort();
    expect(stalled).to.deep.equal(["late-id", "stall-lease", "stall-retry"]);
  });

  it("the migration gives a pending row an older version left with neither lease nor retry time a retry time, so the sweep finds it", async () => {
    const runner = ds.createQueryRunner();
    try {
      const migration = new HotStatusUpdates1764400000000();
      await migration.down(runner);
      await runner.query(
        `INSERT INTO messaging.messages (${cols}) VALUES ('orphan', 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'pending', NULL, 1, NULL, NULL, now() - interval '2 hours')`,
      );
      await migration.up(runner);
    } finally {
      await runner.release();
    }
    expect((await findStalledPending(ds, 3_000, 100)).map((m) => m.id)).to.include("orphan");
  });
});
