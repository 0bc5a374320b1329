import type { ObjectLiteral, SelectQueryBuilder } from "typeorm";
import { isCreatedPosition, type CreatedPosition, type CursorCodec } from "@platform/http";

/**
 * The gateway's lists (organizations, API keys, users) page as /api/v1 does (contract section 3): creation order,
 * `created_at` then `id`, after the cursor's position. Reads `limit + 1` rows; the extra one says a next page exists.
 */
export function readInCreationOrder<E extends ObjectLiteral>(qb: SelectQueryBuilder<E>, alias: string, limit: number, after?: CreatedPosition): Promise<E[]> {
  qb.orderBy(`${alias}.created_at`, "ASC").addOrderBy(`${alias}.id`, "ASC").limit(limit + 1);
  if (after) qb.andWhere(`(${alias}.created_at, ${alias}.id) > (:createdAt, :id)`, after);
  return qb.getMany();
}

/** A position in one organization's list: its cursor pages that organization's list only. */
export type OrganizationPosition = CreatedPosition & { o: string };

/** The cursor's position when it was issued for `organizationId`'s list; anything else is `INVALID_CURSOR` (`CursorCodec.decode`). */
export const positionIn =
  (organizationId: string) =>
  (p: unknown): p is OrganizationPosition =>
    isCreatedPosition(p) && (p as OrganizationPosition).o === organizationId;

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
