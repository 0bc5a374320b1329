import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"messaging"`;

/**
 * The message a claimed Idempotency-Key's request creates, fixed at the claim:
 * a request that takes over an abandoned claim answers that message instead
 * of creating (and sending) a second one.
 */
export class IdempotencyMessage1764000002000 implements MigrationInterface {
  name = "IdempotencyMessage1764000002000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.idempotency_keys ADD COLUMN message_id text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.idempotency_keys DROP COLUMN message_id`);
  }
}
