import type { Contact, PageQuery } from "@platform/contracts";
import { CursorCodec } from "@platform/http";
import { iso } from "@platform/db";
import type { ContactRow } from "../db/repositories/contacts.repository";
import type { ContactsContext } from "./context";

/** What a contacts cursor carries: the organization it was issued to and the last row's (createdAt, id). */
export interface ContactCursorPosition {
  o: string;
  t: string;
  i: string;
}

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function isPosition(p: unknown): p is ContactCursorPosition {
  const v = p as Partial<ContactCursorPosition> | null;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.o === "string" &&
    typeof v.i === "string" &&
    v.i.length > 0 &&
    v.i.length <= 64 &&
    typeof v.t === "string" &&
    ISO_MS.test(v.t) &&
    !Number.isNaN(Date.parse(v.t))
  );
}

/** The cursor codec of the contacts list (keyed with INTERNAL_TOKEN, shared by all replicas). */
export const contactCursorCodec = (internalToken: string) => new CursorCodec<ContactCursorPosition>(internalToken, "contacts.v1");

export function toContact(row: ContactRow): Contact {
  return {
    id: row.id,
    phone: row.phone,
    isOptedOut: row.optedOutChannelIds.length > 0,
    optedOutChannelIds: row.optedOutChannelIds,
    createdAt: iso(row.createdAt)!,
    updatedAt: iso(row.updatedAt)!,
    ...(row.waId !== null ? { waId: row.waId } : {}),
    ...(row.name !== null ? { name: row.name } : {}),
    ...(row.email !== null ? { email: row.email } : {}),
  };
}

/**
 * One page of contacts in (createdAt, id) order. The cursor is a keyset
 * position, not an offset: contacts inserted while a client pages never shift
 * the rows it has not read yet, and a deep page costs what the first one does.
 */
export async function listContacts(
  ctx: ContactsContext,
  organizationId: string,
  query: PageQuery,
): Promise<{ items: Contact[]; nextCursor?: string }> {
  const codec = contactCursorCodec(ctx.env.INTERNAL_TOKEN);
  let after: { createdAt: string; id: string } | null = null;
  if (query.cursor !== undefined) {
    const position = codec.decode(query.cursor, (p): p is ContactCursorPosition => isPosition(p) && p.o === organizationId);
    after = { createdAt: position.t, id: position.i };
  }
  const rows = await ctx.contacts.page(organizationId, after, query.limit + 1);
  const more = rows.length > query.limit;
  const pageRows = more ? rows.slice(0, query.limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    items: pageRows.map(toContact),
    ...(more && last ? { nextCursor: codec.encode({ o: organizationId, t: iso(last.createdAt)!, i: last.id }) } : {}),
  };
}
