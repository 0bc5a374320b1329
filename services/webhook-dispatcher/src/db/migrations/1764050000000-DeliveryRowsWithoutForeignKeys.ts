import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The hot path's rows without foreign keys (ADR 0012). Every delivery inserted a
 * job row checked against `events` and `webhooks` and an attempt row checked
 * against `webhooks`: three RI trigger firings, each a lookup plus a row lock
 * (`FOR KEY SHARE`, written to the WAL; on the one `webhooks` row that every
 * delivery of a webhook locks, a MultiXact as soon as two transactions overlap).
 * One code path writes these tables and already guarantees what the keys did:
 * jobs are created in the statement that stores their event and only for a
 * webhook it reads; an event is pruned only when no job refers to it; the
 * attempt log is written only for an existing webhook; deleting a webhook
 * deletes its jobs and attempt log in the same transaction (was ON DELETE
 * CASCADE). The index on `delivery_jobs (webhook_id)` only served the cascade
 * and the rare drops of a webhook's jobs (deactivation, deletion, pruning),
 * which now read the jobs table, small by design (pending jobs only). The index
 * on `delivery_attempts (created_at)` only served the retention, which deletes
 * by id now (ids are time-sortable): one index fewer written per delivery.
 */
export class DeliveryRowsWithoutForeignKeys1764050000000 implements MigrationInterface {
  name = "DeliveryRowsWithoutForeignKeys1764050000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks.delivery_jobs
      DROP CONSTRAINT IF EXISTS delivery_jobs_event_id_fkey,
      DROP CONSTRAINT IF EXISTS delivery_jobs_webhook_id_fkey`);
    await q.query(`ALTER TABLE webhooks.delivery_attempts DROP CONSTRAINT IF EXISTS delivery_attempts_webhook_id_fkey`);
    await q.query(`DROP INDEX IF EXISTS webhooks.delivery_jobs_webhook_idx`);
    // Retention deletes old attempts by id (time-sortable) through the primary key.
    await q.query(`DROP INDEX IF EXISTS webhooks.delivery_attempts_created_idx`);
  }

  async down(q: QueryRunner): Promise<void> {
    // Rows the keys would have refused (a delete racing a write) go first.
    await q.query(`DELETE FROM webhooks.delivery_jobs j WHERE NOT EXISTS (SELECT 1 FROM webhooks.webhooks w WHERE w.id = j.webhook_id)
      OR NOT EXISTS (SELECT 1 FROM webhooks.events e WHERE e.id = j.event_id)`);
    await q.query(`DELETE FROM webhooks.delivery_attempts a WHERE NOT EXISTS (SELECT 1 FROM webhooks.webhooks w WHERE w.id = a.webhook_id)`);
    await q.query(`CREATE INDEX delivery_jobs_webhook_idx ON webhooks.delivery_jobs (webhook_id)`);
    await q.query(`CREATE INDEX delivery_attempts_created_idx ON webhooks.delivery_attempts (created_at)`);
    await q.query(`ALTER TABLE webhooks.delivery_jobs
      ADD CONSTRAINT delivery_jobs_event_id_fkey FOREIGN KEY (event_id) REFERENCES webhooks.events (id) ON DELETE CASCADE,
      ADD CONSTRAINT delivery_jobs_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks.webhooks (id) ON DELETE CASCADE`);
    await q.query(`ALTER TABLE webhooks.delivery_attempts
      ADD CONSTRAINT delivery_attempts_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks.webhooks (id) ON DELETE CASCADE`);
  }
}
