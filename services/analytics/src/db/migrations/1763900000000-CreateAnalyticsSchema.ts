import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The analytics schema (docs/adr/0007-analytics-buckets.md):
 *
 * - `messages`: one row per outbound message (organization, id, createdAt,
 *   current status and its rank), the source of truth for exactness and for
 *   the partial hours at a range's edges;
 * - `buckets`: counts per (organization, granularity, bucket start, status) at
 *   three granularities (hour `h`, day `d`, month `m`, UTC), so that any range
 *   reads a few dozen bucket rows, never the messages in between;
 * - `apply_message_statuses(...)`: the one set-based ingestion statement, called
 *   by the JetStream consumer per batch and by the bench's bulk load.
 */
export class CreateAnalyticsSchema1763900000000 implements MigrationInterface {
  name = "CreateAnalyticsSchema1763900000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE analytics.messages (
      organization_id text NOT NULL,
      message_id text NOT NULL,
      created_at timestamptz NOT NULL,
      status text NOT NULL,
      rank smallint NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (organization_id, message_id)
    )`);
    // The exact count of a range's partial hours: an index-only scan.
    await q.query(`CREATE INDEX messages_org_created ON analytics.messages (organization_id, created_at) INCLUDE (status)`);

    await q.query(`CREATE TABLE analytics.buckets (
      organization_id text NOT NULL,
      granularity "char" NOT NULL CHECK (granularity IN ('h', 'd', 'm')),
      bucket_start timestamptz NOT NULL,
      status text NOT NULL,
      count bigint NOT NULL,
      PRIMARY KEY (organization_id, granularity, bucket_start, status)
    )`);

    // Forward-only (contract section 2): a status replaces the stored one only
    // when its rank is higher (pending 0 < sent 1 < delivered 2 < read 3 =
    // failed 3), so read and failed are final and failed comes from sent or
    // delivered (or directly: a refused send). A message first seen through
    // any status is created with it. Each batch row is one message (the caller
    // keeps the highest-ranked event of a message per batch).
    //
    // The transaction-scoped advisory lock makes appliers take turns, so the
    // old statuses read by the statement below (a fresh snapshot, taken after
    // the lock) are exactly the ones the upsert replaces: the bucket deltas
    // are the transitions that really happened, once each.
    await q.query(`CREATE FUNCTION analytics.apply_message_statuses(
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
            WHERE EXCLUDED.rank > m.rank
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
      $fn$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION analytics.apply_message_statuses(text[], text[], timestamptz[], text[], smallint[])`);
    await q.query(`DROP TABLE analytics.buckets`);
    await q.query(`DROP TABLE analytics.messages`);
  }
}
