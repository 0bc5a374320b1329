import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Every opt-out record of one phone (active or not), by its last change: the contacts list's `updatedAt` reads the
 * latest per contact, which the partial index of active records cannot serve.
 */
export class OptOutsByPhone1764500000000 implements MigrationInterface {
  name = "OptOutsByPhone1764500000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX IF NOT EXISTS opt_outs_phone_changed_idx ON contacts.opt_outs (organization_id, phone, updated_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS contacts.opt_outs_phone_changed_idx`);
  }
}
