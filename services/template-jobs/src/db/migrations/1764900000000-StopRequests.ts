import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * How a job that a run holds is to end (`cancelled` by its cancel, `failed` by its template's disabling or rejection):
 * the job keeps its status until the run has recorded its batches in flight and lets go, and only then takes this one,
 * so a final status always shows final counts (ADR 0023).
 */
export class StopRequests1764900000000 implements MigrationInterface {
  name = "StopRequests1764900000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "template_jobs".jobs ADD COLUMN stop_as text CHECK (stop_as IN ('cancelled', 'failed'))`);
    await q.query(`CREATE INDEX jobs_stop_requested ON "template_jobs".jobs (lease_until) WHERE stop_as IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "template_jobs".jobs DROP COLUMN stop_as`);
  }
}
