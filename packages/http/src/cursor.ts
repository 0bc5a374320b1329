import { createHmac, timingSafeEqual } from "node:crypto";
import { ApiError } from "./errors";

/** Far above any cursor this codec issues; longer ones are refused before any work. */
const MAX_CURSOR_LENGTH = 2_048;

/** The usual keyset position: the last item's creation time (ISO 8601) and its id, which breaks ties. */
export interface CreatedPosition {
  createdAt: string;
  id: string;
}

export const isCreatedPosition = (p: unknown): p is CreatedPosition =>
  typeof p === "object" &&
  p !== null &&
  typeof (p as CreatedPosition).id === "string" &&
  typeof (p as CreatedPosition).createdAt === "string" &&
  !Number.isNaN(Date.parse((p as CreatedPosition).createdAt));

/** A position in one organization's list: its cursor pages that organization's list only. */
export type OrganizationPosition = CreatedPosition & { o: string };

/** The cursor's position when it was issued for `organizationId`'s list; anything else is `INVALID_CURSOR` (`CursorCodec.decode`). */
export const positionIn =
  (organizationId: string) =>
  (p: unknown): p is OrganizationPosition =>
    isCreatedPosition(p) && (p as OrganizationPosition).o === organizationId;

/**
 * Opaque keyset cursors: base64url JSON plus an HMAC, so a cursor this service
 * did not issue (or one that was edited) is `400 INVALID_CURSOR`, never a
 * query with attacker-chosen bounds. The key is shared by all replicas.
 */
export class CursorCodec<T extends object> {
  constructor(private readonly key: string, private readonly kind: string) {}

  encode(position: T): string {
    const body = Buffer.from(JSON.stringify({ k: this.kind, p: position })).toString("base64url");
    return `${body}.${this.sign(body)}`;
  }

  decode(cursor: string, isValid: (p: unknown) => p is T): T {
    if (cursor.length > MAX_CURSOR_LENGTH) throw this.invalid();
    const [body, sig, extra] = cursor.split(".");
    if (!body || !sig || extra !== undefined) throw this.invalid();
    const expected = Buffer.from(this.sign(body));
    const given = Buffer.from(sig);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw this.invalid();
    let parsed: { k?: unknown; p?: unknown };
    try {
      parsed = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
    } catch {
      throw this.invalid();
    }
    if (parsed.k !== this.kind || !isValid(parsed.p)) throw this.invalid();
    return parsed.p;
  }

  private sign(body: string) {
    return createHmac("sha256", this.key).update(`${this.kind}:${body}`).digest("base64url").slice(0, 22);
  }

  private invalid() {
    return new ApiError("INVALID_CURSOR", "The cursor is not valid; start again without one");
  }
}
