import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"template_jobs"`;

/**
 * job_recipients loses its foreign key to jobs: Postgres checks a foreign key
 * once per inserted row (a trigger and an index probe each), which made the
 * 50,000-row insert of a job's accept about twice as expensive. The key
 * guarded nothing the code can break: recipients are inserted only in the
 * transaction that inserts their job, and jobs are never deleted
 * (docs/adr/0006-template-jobs-exactly-once.md, "Accepting a job").
 */
export class RecipientsWithoutForeignKey1764100000000 implements MigrationInterface {
  name = "RecipientsWithoutForeignKey1764100000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.job_recipients DROP CONSTRAINT IF EXISTS job_recipients_job_id_fkey`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.job_recipients ADD CONSTRAINT job_recipients_job_id_fkey FOREIGN KEY (job_id) REFERENCES ${S}.jobs(id) ON DELETE CASCADE`);
  }
}
