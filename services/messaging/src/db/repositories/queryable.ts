import { queryPrepared } from "@platform/db";
/** A DataSource or a transaction's EntityManager: both run raw SQL. */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<any>;
}

export const SCHEMA = `"messaging"`;

/**
 * Runs SQL and returns its rows. TypeORM's postgres driver answers UPDATE and
 * DELETE (also inside a WITH) with `[rows, rowCount]` instead of the rows.
 */
export async function run<T = any>(q: Queryable, sql: string, params?: unknown[]): Promise<T[]> {
  const result = await q.query(sql, params);
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === "number") return result[0] as T[];
  return result as T[];
}

/** A hot statement, prepared once per connection when run outside a transaction (`queryPrepared`). */
export function runPrepared<T = any>(q: Queryable, name: string, sql: string, params: unknown[]): Promise<T[]> {
  return queryPrepared<T>(q, `messaging.${name}`, sql, params);
}
