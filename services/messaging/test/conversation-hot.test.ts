import { expect } from "chai";
import type { DataSource, EntityManager } from "typeorm";
import { openDatabase } from "@platform/db";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import type { MessagingContext } from "../src/context";
import { HotConversationTouches1764600000000 } from "../src/db/migrations/1764600000000-HotConversationTouches";
import { conversationsRepository } from "../src/db/repositories/conversations.repository";
import { closeIdleConversations } from "../src/use-cases/conversations";
import { definition } from "../src/service";
import { countUpdates as countUpdatesOf } from "./helpers/updates";

/**
 * A message touches its open conversation in place (issue 12, ADR 0020): no
 * index of `conversations` reads a column a touch writes, so each touch is a
 * HOT update, counted by the transaction's own statistics. The idle sweep finds
 * its candidates by `idle_from` and still closes exactly the idle ones. Its own
 * database: the test writes rows by hand.
 */
describe("conversation touches as HOT updates, and the idle sweep over idle_from", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  const IDLE_MS = 60_000;
  const ctx = () => ({ db: ds, env: { CONVERSATION_IDLE_TIMEOUT_MS: IDLE_MS } }) as unknown as MessagingContext;
  const cols = `id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at, idle_from, created_at`;

  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("convhot");
    ds = await openDatabase({ url: env.databaseUrl, schema: "messaging", entities: definition.entities, migrations: definition.migrations, poolSize: 3 });
  });
  after(async () => {
    await ds?.destroy();
    await env?.cleanup();
  });

  const countUpdates = <T>(work: (tx: EntityManager) => Promise<T>) => countUpdatesOf(ds, "messaging.conversations", work);

  const row = async (id: string) =>
    (await ds.query(`SELECT status, last_message_at, idle_from FROM messaging.conversations WHERE id = $1`, [id]))[0] as
      | { status: string; last_message_at: Date; idle_from: Date }
      | undefined;
  const closedEvents = async (id: string) =>
    Number((await ds.query(`SELECT count(*) AS n FROM messaging.outbox WHERE subject = 'evt.conversation.closed.v1' AND payload::text LIKE $1`, [`%${id}%`]))[0].n);

  it("no index of conversations reads last_message_at or updated_at", async () => {
    const rows: Array<{ name: string; def: string }> = await ds.query(
      `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'messaging.conversations'::regclass`,
    );
    expect(rows.map((r) => r.name)).to.include("conversations_idle_from").and.not.include("conversations_idle");
    for (const { def } of rows) expect(def, def).not.to.match(/\b(last_message_at|updated_at)\b/);
  });

  it("a message to an open conversation is a HOT update that moves last_message_at and leaves idle_from", async () => {
    const all = Array.from({ length: 1_500 }, (_, i) => ({ contactId: `hot-ct-${String(i).padStart(4, "0")}`, phone: `+1555${100_000 + i}` }));
    const opened = await conversationsRepository.openOrTouchMany(ds, { organizationId: "org", channelId: "hot-ch", contacts: all });
    expect([...opened.values()].every((c) => c.opened)).to.equal(true);
    // Spread over the table's pages, as the conversations of one batch are.
    const contacts = all.filter((_, i) => i % 50 === 0);
    for (let round = 0; round < 2; round++) {
      const { result, updated, hot } = await countUpdates((tx) => conversationsRepository.openOrTouchMany(tx, { organizationId: "org", channelId: "hot-ch", contacts }));
      expect([...result.values()].some((c) => c.opened)).to.equal(false);
      expect(updated).to.equal(contacts.length);
      expect(hot).to.equal(contacts.length);
    }
    const single = await countUpdates((tx) => conversationsRepository.openOrTouch(tx, { organizationId: "org", channelId: "hot-ch", ...contacts[0] }));
    expect(single.result.opened).to.equal(false);
    expect(single).to.include({ updated: 1, hot: 1 });
    const first = await row(opened.get(contacts[0].contactId)!.conversation.id);
    expect(first!.idle_from.getTime()).to.be.at.most(opened.get(contacts[0].contactId)!.conversation.last_message_at.getTime());
    expect(first!.last_message_at.getTime()).to.be.above(first!.idle_from.getTime());
  });

  it("the sweep closes the idle conversations behind active candidates, refreshes those, and leaves recent ones", async () => {
    await ds.query(
      `INSERT INTO messaging.conversations (${cols}) VALUES
         ('sw-active-1', 'org', 'sw', 'ct1', '+1', 'open', now() - interval '3 hours', now() - interval '1 second', now() - interval '3 hours', now() - interval '3 hours'),
         ('sw-active-2', 'org', 'sw', 'ct2', '+2', 'open', now() - interval '3 hours', now() - interval '2 seconds', now() - interval '170 minutes', now() - interval '3 hours'),
         ('sw-idle', 'org', 'sw', 'ct3', '+3', 'open', now() - interval '2 hours', now() - interval '90 minutes', now() - interval '2 hours', now() - interval '2 hours'),
         ('sw-recent', 'org', 'sw', 'ct4', '+4', 'open', now() - interval '5 seconds', now() - interval '5 seconds', now() - interval '5 seconds', now() - interval '5 seconds')`,
    );
    // Batches of one: the first two steps find only active candidates; the sweep goes on to the idle one.
    const closed = await closeIdleConversations(ctx(), 1);
    expect(closed).to.equal(1);
    expect((await row("sw-idle"))!.status).to.equal("closed");
    expect(await closedEvents("sw-idle")).to.equal(1);
    for (const id of ["sw-active-1", "sw-active-2"]) {
      const r = (await row(id))!;
      expect(r.status, id).to.equal("open");
      expect(r.idle_from.getTime(), id).to.equal(r.last_message_at.getTime());
      expect(await closedEvents(id)).to.equal(0);
    }
    expect((await row("sw-recent"))!.status).to.equal("open");
    // Nothing else is idle: one step, no candidate.
    expect(await closeIdleConversations(ctx(), 1)).to.equal(0);

    // An active conversation whose last message has become old is closed like any other.
    // (Two minutes later, as far as this conversation can tell.)
    await ds.query(`UPDATE messaging.conversations SET last_message_at = last_message_at - interval '2 minutes', idle_from = idle_from - interval '2 minutes' WHERE id = 'sw-active-1'`);
    expect(await closeIdleConversations(ctx(), 10)).to.equal(1);
    expect((await row("sw-active-1"))!.status).to.equal("closed");
  });

  it("a conversation a message is touching while the sweep runs is left open", async () => {
    await ds.query(
      `INSERT INTO messaging.conversations (${cols}) VALUES
         ('race-1', 'org', 'race', 'ct1', '+1', 'open', now() - interval '2 hours', now() - interval '2 hours', now() - interval '2 hours', now() - interval '2 hours')`,
    );
    const runner = ds.createQueryRunner();
    try {
      await runner.startTransaction();
      // The touch holds the row, uncommitted: the sweep skips it rather than closing it or waiting.
      const touched = await conversationsRepository.openOrTouch(runner.manager, { organizationId: "org", channelId: "race", contactId: "ct1", phone: "+1" });
      expect(touched.opened).to.equal(false);
      expect(await closeIdleConversations(ctx(), 10)).to.equal(0);
      await runner.commitTransaction();
    } finally {
      await runner.release();
    }
    // Committed: a candidate (idle_from is old) that is not idle; refreshed, not closed.
    expect(await closeIdleConversations(ctx(), 10)).to.equal(0);
    const r = (await row("race-1"))!;
    expect(r.status).to.equal("open");
    expect(r.idle_from.getTime()).to.equal(r.last_message_at.getTime());
  });

  it("the migration sets idle_from of existing conversations to their last message", async () => {
    const runner = ds.createQueryRunner();
    try {
      const migration = new HotConversationTouches1764600000000();
      await migration.down(runner);
      await runner.query(
        `INSERT INTO messaging.conversations (id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at, created_at)
         VALUES ('old-1', 'org', 'mig', 'ct1', '+1', 'open', now() - interval '3 hours', now() - interval '2 hours', now() - interval '3 hours')`,
      );
      await migration.up(runner);
    } finally {
      await runner.release();
    }
    const r = (await row("old-1"))!;
    expect(r.idle_from.getTime()).to.equal(r.last_message_at.getTime());
    expect(await closeIdleConversations(ctx(), 10)).to.equal(1);
    expect((await row("old-1"))!.status).to.equal("closed");
  });
});
