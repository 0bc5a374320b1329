import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * An Idempotency-Key's stored answer keeps the bytes it was sent with (`json`, not `jsonb`, which reorders an
 * object's keys): a replay is the first answer again, key order included (contract: "returns the first answer again").
 */
export class IdempotencyBodyAsSent1764700000000 implements MigrationInterface {
  name = "IdempotencyBodyAsSent1764700000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "messaging".idempotency_keys ALTER COLUMN response_body TYPE json USING response_body::json`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "messaging".idempotency_keys ALTER COLUMN response_body TYPE jsonb USING response_body::jsonb`);
  }
}
