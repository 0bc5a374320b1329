import { createHash, randomBytes } from "node:crypto";
import type { DataSource } from "typeorm";
import { IsNull } from "typeorm";
import type { z } from "zod";
import type { AcceptInvitationRequest, ConsoleUser, CreateInvitationRequest, CreateUserRequest, PageQuery } from "@platform/contracts";
import { iso } from "@platform/db";
import { ApiError, CursorCodec, positionIn, type CreatedPosition } from "@platform/http";
import { newId } from "@platform/id";
import { hashPassword } from "../auth/passwords";
import { pageInCreationOrder, readInCreationOrder } from "../db/created-order";
import { InvitationEntity } from "../db/entities/invitation.entity";
import { UserEntity } from "../db/entities/user.entity";

export const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest("hex");
const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;

/** People of an organization: Owners, Admins and Members of the console (ADR 0009). */
export class ConsoleUsers {
  private readonly cursors: CursorCodec<CreatedPosition>;

  constructor(
    private readonly db: DataSource,
    /** log2 of scrypt's N for new hashes. */
    private readonly scryptCost: number,
    /** Key of the admin list's cursors' HMAC, shared by every replica. */
    cursorKey: string,
  ) {
    this.cursors = new CursorCodec<CreatedPosition>(cursorKey, "users");
  }

  toDto(u: UserEntity): ConsoleUser {
    return { id: u.id, organizationId: u.organizationId, email: u.email, role: u.role, createdAt: iso(u.createdAt)! };
  }

  /** The operator's way in (admin token): usually the organization's first Owner. */
  async create(organizationId: string, input: z.infer<typeof CreateUserRequest>): Promise<ConsoleUser> {
    const user = Object.assign(new UserEntity(), {
      id: newId("user"),
      organizationId,
      email: input.email,
      role: input.role,
      passwordHash: await hashPassword(input.password, this.scryptCost),
      createdAt: new Date(),
    });
    await this.insert(user);
    return this.toDto(user);
  }

  async list(organizationId: string): Promise<ConsoleUser[]> {
    const rows = await this.db.getRepository(UserEntity).find({ where: { organizationId }, order: { createdAt: "ASC", id: "ASC" } });
    return rows.map((u) => this.toDto(u));
  }

  /** One page of the organization's users in creation order, for the admin API (contract section 3: the /api/v1 cursor pagination). */
  async listPage(organizationId: string, q: PageQuery): Promise<{ items: ConsoleUser[]; nextCursor?: string }> {
    // Decoded first: a cursor this service did not issue is 400 before any work.
    const after = q.cursor !== undefined ? this.cursors.decode(q.cursor, positionIn(organizationId)) : undefined;
    const rows = await readInCreationOrder(this.db.getRepository(UserEntity).createQueryBuilder("u").where("u.organization_id = :organizationId", { organizationId }), "u", q.limit, after);
    return pageInCreationOrder(rows, q.limit, this.cursors, (u) => this.toDto(u), organizationId);
  }

  async remove(organizationId: string, userId: string, by: string): Promise<void> {
    if (userId === by) throw new ApiError("CONFLICT", "You cannot remove yourself");
    const res = await this.db.getRepository(UserEntity).delete({ id: userId, organizationId });
    if (!res.affected) throw ApiError.notFound("User");
  }

  /** A role change applies at once: every request reads the user's current role. */
  async setRole(organizationId: string, userId: string, role: ConsoleUser["role"], by: string): Promise<ConsoleUser> {
    if (userId === by) throw new ApiError("CONFLICT", "You cannot change your own role", [{ path: "role", message: "another Owner must change it" }]);
    const repo = this.db.getRepository(UserEntity);
    const res = await repo.update({ id: userId, organizationId }, { role });
    if (!res.affected) throw ApiError.notFound("User");
    return this.toDto((await repo.findOneBy({ id: userId, organizationId }))!);
  }

  /** The token is in this answer only; the database keeps its SHA-256. */
  async invite(organizationId: string, invitedBy: string, input: z.infer<typeof CreateInvitationRequest>) {
    const token = `inv_${randomBytes(32).toString("base64url")}`;
    const invitation = Object.assign(new InvitationEntity(), {
      id: newId("invitation"),
      organizationId,
      email: input.email,
      role: input.role,
      tokenHash: sha256(token),
      invitedBy,
      createdAt: new Date(),
      expiresAt: new Date(Date.now() + INVITATION_TTL_MS),
      acceptedAt: null,
    });
    await this.db.getRepository(InvitationEntity).insert(invitation);
    return { id: invitation.id, email: invitation.email, role: invitation.role, token, expiresAt: iso(invitation.expiresAt)! };
  }

  async pendingInvitations(organizationId: string) {
    const rows = await this.db
      .getRepository(InvitationEntity)
      .createQueryBuilder("i")
      .where("i.organization_id = :organizationId AND i.accepted_at IS NULL AND i.expires_at > now()", { organizationId })
      .orderBy("i.created_at", "ASC")
      .addOrderBy("i.id", "ASC")
      .getMany();
    return rows.map((i) => ({ id: i.id, email: i.email, role: i.role, createdAt: iso(i.createdAt)!, expiresAt: iso(i.expiresAt)! }));
  }

  /** Withdrawn: its token stops working at once. */
  async revokeInvitation(organizationId: string, invitationId: string): Promise<void> {
    const res = await this.db.getRepository(InvitationEntity).delete({ id: invitationId, organizationId, acceptedAt: IsNull() });
    if (!res.affected) throw ApiError.notFound("Invitation");
  }

  /** Used once, before it expires: the user is created with the invitation's organization, email and role. */
  async accept(input: z.infer<typeof AcceptInvitationRequest>): Promise<ConsoleUser> {
    const passwordHash = await hashPassword(input.password, this.scryptCost);
    return this.db.transaction(async (m) => {
      const invitation = await m
        .getRepository(InvitationEntity)
        .createQueryBuilder("i")
        .setLock("pessimistic_write")
        .where("i.token_hash = :hash AND i.accepted_at IS NULL AND i.expires_at > now()", { hash: sha256(input.token) })
        .getOne();
      // One answer for unknown, used and expired tokens.
      if (!invitation) throw ApiError.notFound("Invitation");
      await m.getRepository(InvitationEntity).update({ id: invitation.id, acceptedAt: IsNull() }, { acceptedAt: new Date() });
      const user = Object.assign(new UserEntity(), {
        id: newId("user"),
        organizationId: invitation.organizationId,
        email: invitation.email,
        role: invitation.role,
        passwordHash,
        createdAt: new Date(),
      });
      await this.insert(user, m.getRepository(UserEntity));
      return this.toDto(user);
    });
  }

  private async insert(user: UserEntity, repo = this.db.getRepository(UserEntity)): Promise<void> {
    try {
      await repo.insert(user);
    } catch (err) {
      if ((err as { code?: string }).code === "23505") throw new ApiError("CONFLICT", "A user with this email already exists", [{ path: "email", message: "already in use" }]);
      throw err;
    }
  }
}
