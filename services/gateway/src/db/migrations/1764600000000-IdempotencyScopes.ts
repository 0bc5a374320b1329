import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * An `Idempotency-Key` is scoped to the organization (contract, "Idempotency"): the endpoint each key was first used
 * on, for 24 hours, so that the same key on the other keyed endpoint is refused (ADR 0021).
 */
export class IdempotencyScopes1764600000000 implements MigrationInterface {
  name = "IdempotencyScopes1764600000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE gateway.idempotency_scopes (
      organization_id text NOT NULL,
      key text NOT NULL,
      endpoint text NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (organization_id, key)
    )`);
    await q.query(`CREATE INDEX idempotency_scopes_expiry ON gateway.idempotency_scopes (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE gateway.idempotency_scopes`);
  }
}
