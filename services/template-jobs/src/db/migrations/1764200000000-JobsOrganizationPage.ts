import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"template_jobs"`;

/** The console's job list (newest first per organization) reads this index instead of scanning every organization's jobs. */
export class JobsOrganizationPage1764200000000 implements MigrationInterface {
  name = "JobsOrganizationPage1764200000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX IF NOT EXISTS jobs_org_page ON ${S}.jobs (organization_id, id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS ${S}.jobs_org_page`);
  }
}
