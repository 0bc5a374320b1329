import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * When a cancelled job's recipients still `sending` are settled (ADR 0018): a run that died before recording a batch
 * left them so, with outcomes only messaging knows. Set by the cancel to the end of the run's lease; the runners'
 * sweep asks messaging for those keys' outcomes then, and clears it.
 */
export class SettleCancelled1764500000000 implements MigrationInterface {
  name = "SettleCancelled1764500000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "template_jobs".jobs ADD COLUMN settle_after timestamptz`);
    await q.query(`CREATE INDEX jobs_settle ON "template_jobs".jobs (settle_after) WHERE settle_after IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "template_jobs".jobs DROP COLUMN settle_after`);
  }
}
