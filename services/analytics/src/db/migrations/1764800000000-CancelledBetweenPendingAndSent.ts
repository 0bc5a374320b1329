import type { MigrationInterface, QueryRunner } from "typeorm";

/** `apply_message_statuses` as CreateAnalyticsSchema wrote it, but for when a status replaces the stored one. */
const applyMessageStatuses = (replaceWhen: string) => `CREATE OR REPLACE FUNCTION analytics.apply_message_statuses(
        p_org text[], p_id text[], p_created timestamptz[], p_status text[], p_rank smallint[])
      RETURNS integer LANGUAGE plpgsql AS $fn$
      DECLARE changed integer;
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('analytics.apply_message_statuses'));
        WITH input AS (
          SELECT * FROM unnest(p_org, p_id, p_created, p_status, p_rank) AS t(organization_id, message_id, created_at, status, rank)
        ),
        old AS (
          SELECT m.organization_id, m.message_id, m.status
          FROM analytics.messages m JOIN input i USING (organization_id, message_id)
        ),
        upserted AS (
          INSERT INTO analytics.messages AS m (organization_id, message_id, created_at, status, rank)
          SELECT organization_id, message_id, date_trunc('milliseconds', created_at), status, rank FROM input
          ON CONFLICT (organization_id, message_id) DO UPDATE
            SET status = EXCLUDED.status, rank = EXCLUDED.rank, updated_at = now()
            WHERE ${replaceWhen}
          RETURNING m.organization_id, m.message_id, m.created_at, m.status
        ),
        deltas AS (
          SELECT u.organization_id, u.created_at, u.status, 1 AS d FROM upserted u
          UNION ALL
          SELECT u.organization_id, u.created_at, o.status, -1 FROM upserted u
            JOIN old o ON o.organization_id = u.organization_id AND o.message_id = u.message_id
        ),
        moved AS (
          INSERT INTO analytics.buckets AS b (organization_id, granularity, bucket_start, status, count)
          SELECT organization_id, g.granularity, date_trunc(g.unit, created_at, 'UTC'), status, sum(d)
          FROM deltas CROSS JOIN (VALUES ('h'::"char", 'hour'), ('d'::"char", 'day'), ('m'::"char", 'month')) AS g(granularity, unit)
          GROUP BY 1, 2, 3, 4
          HAVING sum(d) <> 0
          ORDER BY 1, 2, 3, 4
          ON CONFLICT (organization_id, granularity, bucket_start, status) DO UPDATE SET count = b.count + EXCLUDED.count
          RETURNING 1
        )
        SELECT count(*) INTO changed FROM upserted;
        RETURN changed;
      END
      $fn$`;

/**
 * `cancelled` (a template send its job stopped before it reached the provider, ADR 0018) sits between `pending` and
 * `sent`: it replaces `pending`, and any provider status replaces it (a call that went unanswered had been accepted
 * after all). Ranks are whole numbers, so `cancelled` shares rank 0 with `pending`, and the one statement lets it
 * replace `pending` by name.
 */
export class CancelledBetweenPendingAndSent1764800000000 implements MigrationInterface {
  name = "CancelledBetweenPendingAndSent1764800000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(applyMessageStatuses(`EXCLUDED.rank > m.rank OR (EXCLUDED.status = 'cancelled' AND m.status = 'pending')`));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(applyMessageStatuses(`EXCLUDED.rank > m.rank`));
  }
}
