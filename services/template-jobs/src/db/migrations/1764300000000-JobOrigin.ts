import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The request that created a job (its request id and W3C `traceparent`): the
 * job's run, on whichever replica claims it, continues that request's log
 * context and trace, so its sends' events carry the request id too.
 */
export class JobOrigin1764300000000 implements MigrationInterface {
  name = "JobOrigin1764300000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "template_jobs".jobs ADD COLUMN request_id text, ADD COLUMN traceparent text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "template_jobs".jobs DROP COLUMN request_id, DROP COLUMN traceparent`);
  }
}
