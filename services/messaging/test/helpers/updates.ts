import type { DataSource, EntityManager } from "typeorm";

/**
 * Updates of `table` made by `work` in one transaction, and how many of them were HOT (no new index entries), from
 * the backend's counts not yet flushed to the statistics: the difference before and after is this work's.
 */
export async function countUpdates<T>(ds: DataSource, table: string, work: (tx: EntityManager) => Promise<T>): Promise<{ result: T; updated: number; hot: number }> {
  const counts = async (tx: EntityManager) => {
    const [row] = await tx.query(
      `SELECT pg_stat_get_xact_tuples_updated($1::regclass)::int AS updated, pg_stat_get_xact_tuples_hot_updated($1::regclass)::int AS hot`,
      [table],
    );
    return row as { updated: number; hot: number };
  };
  return ds.transaction(async (tx) => {
    const before = await counts(tx);
    const result = await work(tx);
    const after = await counts(tx);
    return { result, updated: after.updated - before.updated, hot: after.hot - before.hot };
  });
}
