import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"messaging"`;

/**
 * Status changes of `messages` become HOT updates (issue 12). `messages_stuck`
 * had `status` in its predicate (WHERE status = 'pending'), so every status
 * change (`sent` → `delivered` → `read`) wrote a new entry into every index of
 * the table: Postgres is the largest share of a status callback's CPU. The
 * sweeper's index now covers the rows that still have a lease or a retry
 * time: a status change leaves `lease_until` and `next_attempt_at` NULL as they
 * already were, and writes no indexed column. Pending rows always have one of
 * the two (the only statement that cleared the lease of a possibly pending row,
 * `setProviderIdIfMissing`, keeps it now); a pending row an older version left
 * with neither gets a retry time now, so the sweep still finds it.
 *
 * `fillfactor = 90` leaves room on each new page for the next versions of its
 * rows: a HOT update needs its new version on the same page.
 */
export class HotStatusUpdates1764400000000 implements MigrationInterface {
  name = "HotStatusUpdates1764400000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE ${S}.messages SET next_attempt_at = created_at WHERE status = 'pending' AND lease_until IS NULL AND next_attempt_at IS NULL`);
    await q.query(`CREATE INDEX messages_unsettled ON ${S}.messages (lease_until) WHERE lease_until IS NOT NULL OR next_attempt_at IS NOT NULL`);
    await q.query(`DROP INDEX ${S}.messages_stuck`);
    await q.query(`ALTER TABLE ${S}.messages SET (fillfactor = 90)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.messages RESET (fillfactor)`);
    await q.query(`CREATE INDEX messages_stuck ON ${S}.messages (lease_until) WHERE status = 'pending'`);
    await q.query(`DROP INDEX ${S}.messages_unsettled`);
  }
}
