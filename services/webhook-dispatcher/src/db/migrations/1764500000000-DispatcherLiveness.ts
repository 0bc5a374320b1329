import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Which process holds a leased delivery job, and which processes are alive (ADR 0019). A job's lease (`due_at` pushed
 * past its attempt and its wait in the process's lanes) lasts 4 × WEBHOOK_TIMEOUT_MS + 60 s; a process that died held
 * its jobs that long. Each process now beats in `dispatchers`; the jobs of one whose beat has stopped are due again at
 * once.
 */
export class DispatcherLiveness1764500000000 implements MigrationInterface {
  name = "DispatcherLiveness1764500000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks.delivery_jobs ADD COLUMN lease_owner text`);
    await q.query(`CREATE TABLE webhooks.dispatchers (owner text PRIMARY KEY, alive_until timestamptz NOT NULL)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhooks.dispatchers`);
    await q.query(`ALTER TABLE webhooks.delivery_jobs DROP COLUMN lease_owner`);
  }
}
