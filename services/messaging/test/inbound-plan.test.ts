import { expect } from "chai";
import type { DataSource } from "typeorm";
import { bulkTransaction, openDatabase } from "@platform/db";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { conversationsRepository } from "../src/db/repositories/conversations.repository";
import { messagesRepository, type InboundInsert } from "../src/db/repositories/messages.repository";
import { definition } from "../src/service";

/**
 * The inbound write's statements run on the bulk pool, each planned once per
 * connection (ADR 0013). A plan made while the tables were empty must still
 * read only the rows it names once they hold thousands: the known-ids check,
 * the advisory locks, the conversations' upsert and the messages' insert,
 * never a whole table. Its own database.
 */
describe("inbound write planned once, on empty tables", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("inplan");
    ds = await openDatabase({ url: env.databaseUrl, schema: "messaging", entities: definition.entities, migrations: definition.migrations, poolSize: 2 });
  });
  after(async () => {
    await ds?.destroy();
    await env?.cleanup();
  });

  it("reads the named messages and conversations through their keys, not the tables, with plans made while they were empty", async function () {
    this.timeout(60_000);
    const cols = `id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, status, provider_message_id`;
    for (const table of ["messages", "conversations"]) await ds.query(`ALTER TABLE messaging.${table} SET (autovacuum_enabled = false)`);

    const write = (incoming: Array<{ pmid: string; contact: string }>) =>
      bulkTransaction(ds, async (tx) => {
        const ids = incoming.map((i) => i.pmid);
        await messagesRepository.lockInboundIds(tx, ids);
        const known = await messagesRepository.knownInboundIds(tx, ids);
        const todo = incoming.filter((i) => !known.has(i.pmid));
        const conversations = await conversationsRepository.openOrTouchMany(tx, {
          organizationId: "org",
          channelId: "ch",
          contacts: todo.map((i) => ({ contactId: i.contact, phone: `+1${i.contact}` })),
        });
        const rows: InboundInsert[] = todo.map((i) => ({
          id: `msg_plan_${i.pmid}`,
          organizationId: "org",
          channelId: "ch",
          conversationId: conversations.get(i.contact)!.conversation.id,
          contactId: i.contact,
          phone: `+1${i.contact}`,
          type: "text",
          text: "hello",
          buttonText: null,
          buttonPayload: null,
          providerMessageId: i.pmid,
          providerTimestamp: new Date(),
        }));
        const stored = await messagesRepository.insertInboundBatch(
          tx,
          rows,
          rows.map((r) => ({ messageId: r.id, msgId: `evt_${r.id}`, subject: "events.message.received", payload: { id: r.id } })),
        );
        const [{ reads }] = await tx.query(
          `SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)::int AS reads
             FROM pg_index WHERE indrelid IN ('messaging.messages'::regclass, 'messaging.conversations'::regclass)`,
        );
        const [{ scans }] = await tx.query(
          `SELECT coalesce(sum(pg_stat_get_xact_numscans(c.oid)), 0)::int AS scans
             FROM pg_class c WHERE c.oid IN ('messaging.messages'::regclass, 'messaging.conversations'::regclass)`,
        );
        return { known, opened: [...conversations.values()].filter((c) => c.opened).length, stored: stored.length, indexReads: reads as number, seqScans: scans as number };
      });

    // The first write meets empty tables, analysed as such: the bulk connection plans each statement now, once (one
    // write after another reuses the pool's last connection).
    for (const table of ["messages", "conversations"]) await ds.query(`ANALYZE messaging.${table}`);
    const first = await write([{ pmid: "wamid.first.1", contact: "ct_first" }]);
    expect(first.stored).to.equal(1);
    // Then the tables fill with rows the plans know nothing of (no ANALYZE, as between two autovacuum visits).
    await ds.query(
      `INSERT INTO messaging.messages (${cols})
       SELECT 'out' || n, 'org', 'ch', 'conv', 'ct', '+1555', 'outbound', 'text', 'sent', 'wamid.out.' || n FROM generate_series(1, 3000) n`,
    );
    await ds.query(
      `INSERT INTO messaging.messages (${cols})
       SELECT 'in' || n, 'org', 'ch', 'conv' || n, 'ct' || n, '+1555' || n, 'inbound', 'text', 'received', 'wamid.in.' || n FROM generate_series(1, 3000) n`,
    );
    await ds.query(
      `INSERT INTO messaging.conversations (id, organization_id, channel_id, contact_id, phone, status, opened_at, last_message_at)
       SELECT 'conv' || n, 'org', 'ch', 'ct' || n, '+1555' || n, 'open', now(), now() FROM generate_series(1, 3000) n`,
    );

    // Five messages: two from contacts with an open conversation, two from new ones, one already stored.
    const incoming = [
      { pmid: "wamid.in.17", contact: "ct17" },
      { pmid: "wamid.new.1", contact: "ct500" },
      { pmid: "wamid.new.2", contact: "ct2999" },
      { pmid: "wamid.new.3", contact: "ct_new_1" },
      { pmid: "wamid.new.4", contact: "ct_new_2" },
    ];
    const second = await write(incoming);
    expect([...second.known]).to.deep.equal(["wamid.in.17"]);
    expect(second.opened).to.equal(2);
    expect(second.stored).to.equal(4);
    // A few index entries per named message and contact, never the 6,000 messages or 3,000 conversations.
    expect(second.indexReads).to.be.lessThan(100);
    expect(second.seqScans).to.equal(0);
    // Again (a redelivery): everything is known, nothing written, still by key.
    const again = await write(incoming);
    expect(again.known.size).to.equal(5);
    expect(again.stored).to.equal(0);
    expect(again.indexReads).to.be.lessThan(100);
    expect(again.seqScans).to.equal(0);
    // The plans were made once, on that connection, while the tables were empty.
    const [{ generic }] = await bulkTransaction(ds, (tx) =>
      tx.query(`SELECT coalesce(sum(generic_plans), 0)::int AS generic, coalesce(sum(custom_plans), 0)::int AS custom FROM pg_prepared_statements WHERE name LIKE 'messaging.%'`),
    );
    expect(generic).to.be.greaterThan(0);
  });
});
