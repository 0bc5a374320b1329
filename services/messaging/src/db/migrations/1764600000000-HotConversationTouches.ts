import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"messaging"`;

/**
 * Every message, inbound or outbound, touches its open conversation
 * (`last_message_at`, `updated_at`): the conversations' upsert was the second
 * most expensive statement on the inbound path (issue 12). The idle sweep's
 * index (`conversations_idle`) was on `last_message_at`, so every touch wrote a
 * new entry into each of the table's four indexes.
 *
 * The sweep now finds its candidates by `idle_from`, a lower bound of
 * `last_message_at` that a touch leaves as it is: set when the conversation
 * opens (the column's default, the inserting transaction's start, is never later
 * than the `clock_timestamp()` of `last_message_at`), and moved up to
 * `last_message_at` by the sweep when it finds a candidate that is not idle
 * (about once per idle timeout of an active conversation). A touch then writes
 * no indexed column and is a HOT update. `fillfactor = 80` leaves room on each
 * page for the rows' next versions; the same for `service_windows`, whose
 * `last_inbound_at` every inbound message moves (its only index is the key).
 */
export class HotConversationTouches1764600000000 implements MigrationInterface {
  name = "HotConversationTouches1764600000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.conversations ADD COLUMN idle_from timestamptz`);
    await q.query(`UPDATE ${S}.conversations SET idle_from = last_message_at`);
    await q.query(`ALTER TABLE ${S}.conversations ALTER COLUMN idle_from SET DEFAULT now(), ALTER COLUMN idle_from SET NOT NULL`);
    await q.query(`CREATE INDEX conversations_idle_from ON ${S}.conversations (idle_from) WHERE status = 'open'`);
    await q.query(`DROP INDEX ${S}.conversations_idle`);
    await q.query(`ALTER TABLE ${S}.conversations SET (fillfactor = 80)`);
    await q.query(`ALTER TABLE ${S}.service_windows SET (fillfactor = 80)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.service_windows RESET (fillfactor)`);
    await q.query(`ALTER TABLE ${S}.conversations RESET (fillfactor)`);
    await q.query(`CREATE INDEX conversations_idle ON ${S}.conversations (last_message_at) WHERE status = 'open'`);
    await q.query(`DROP INDEX ${S}.conversations_idle_from`);
    await q.query(`ALTER TABLE ${S}.conversations DROP COLUMN idle_from`);
  }
}
