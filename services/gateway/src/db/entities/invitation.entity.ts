import { Column, Entity, PrimaryColumn } from "typeorm";

@Entity({ name: "invitations" })
export class InvitationEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  @Column({ type: "text" })
  email!: string;

  @Column({ type: "text" })
  role!: "admin" | "member";

  /** SHA-256 of the token (hex); the token is shown once. */
  @Column({ name: "token_hash", type: "text", select: false })
  tokenHash!: string;

  @Column({ name: "invited_by", type: "text", nullable: true })
  invitedBy!: string | null;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ name: "expires_at", type: "timestamptz" })
  expiresAt!: Date;

  @Column({ name: "accepted_at", type: "timestamptz", nullable: true })
  acceptedAt!: Date | null;
}
