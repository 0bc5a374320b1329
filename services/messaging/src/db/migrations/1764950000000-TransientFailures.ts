import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * `failures`: the attempts of a message that failed, apart from those deferred for a pacing slot (a template send of a
 * busy channel is deferred many times): the retry backoff doubles per failure, not per deferral. A constant default:
 * no table rewrite.
 */
export class TransientFailures1764950000000 implements MigrationInterface {
  name = "TransientFailures1764950000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "messaging".messages ADD COLUMN IF NOT EXISTS failures integer NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "messaging".messages DROP COLUMN IF EXISTS failures`);
  }
}
