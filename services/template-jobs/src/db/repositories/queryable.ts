import { queryPrepared, rowsOf, type SqlRunner } from "@platform/db";

/** A DataSource or a transaction's EntityManager: both run raw SQL. */
export type Queryable = SqlRunner;

export const SCHEMA = `"template_jobs"`;

/** Runs SQL and returns its rows, also for UPDATE and DELETE (`rowsOf`). */
export async function run<T = any>(q: Queryable, sql: string, params?: unknown[]): Promise<T[]> {
  return rowsOf<T>(await q.query(sql, params));
}

/** A hot statement, prepared once per connection when run outside a transaction (`queryPrepared`). */
export function runPrepared<T = any>(q: Queryable, name: string, sql: string, params: unknown[]): Promise<T[]> {
  return queryPrepared<T>(q, `template_jobs.${name}`, sql, params);
}
