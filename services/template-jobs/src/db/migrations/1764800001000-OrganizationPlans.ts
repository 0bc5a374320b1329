import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The plan of each organization, copied from the gateway's `sys.organization.upserted.v1`: the runner does not send
 * the jobs of an `inactive` organization (ADR 0022). An organization without a row (none copied yet) is not inactive.
 */
export class OrganizationPlans1764800001000 implements MigrationInterface {
  name = "OrganizationPlans1764800001000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "template_jobs".organizations (
        id text PRIMARY KEY,
        plan text NOT NULL,
        -- The gateway's updatedAt of the copy: an older copy never replaces a newer one.
        source_updated_at timestamptz NOT NULL,
        synced_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "template_jobs".organizations`);
  }
}
