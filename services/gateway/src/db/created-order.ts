import type { ObjectLiteral, SelectQueryBuilder } from "typeorm";
import type { CreatedPosition, CursorCodec, OrganizationPosition } from "@platform/http";

/**
 * The gateway's lists (organizations, API keys, users) page as /api/v1 does (contract section 3): creation order,
 * `created_at` then `id`, after the cursor's position. Reads `limit + 1` rows; the extra one says a next page exists.
 */
export function readInCreationOrder<E extends ObjectLiteral>(qb: SelectQueryBuilder<E>, alias: string, limit: number, after?: CreatedPosition): Promise<E[]> {
  qb.orderBy(`${alias}.created_at`, "ASC").addOrderBy(`${alias}.id`, "ASC").limit(limit + 1);
  if (after) qb.andWhere(`(${alias}.created_at, ${alias}.id) > (:createdAt, :id)`, after);
  return qb.getMany();
}

/** `{items, nextCursor?}` from what `readInCreationOrder` read; the cursor bound to `organizationId` when given. */
export function pageInCreationOrder<E extends { id: string; createdAt: Date }, T>(
  rows: E[],
  limit: number,
  cursors: CursorCodec<CreatedPosition>,
  toItem: (row: E) => T,
  organizationId?: string,
): { items: T[]; nextCursor?: string } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const items = page.map(toItem);
  if (!(rows.length > limit && last)) return { items };
  const position: CreatedPosition | OrganizationPosition = { createdAt: last.createdAt.toISOString(), id: last.id, ...(organizationId === undefined ? {} : { o: organizationId }) };
  return { items, nextCursor: cursors.encode(position) };
}
