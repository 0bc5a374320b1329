import { Column, Entity, PrimaryColumn } from "typeorm";

@Entity({ name: "sessions" })
export class SessionEntity {
  /** SHA-256 of the cookie's random id (hex): a database read does not yield a usable cookie. */
  @PrimaryColumn({ name: "id_hash", type: "text" })
  idHash!: string;

  @Column({ name: "user_id", type: "text" })
  userId!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  /** Synchronizer token: sent back in `X-CSRF-Token` on every state change. */
  @Column({ name: "csrf_token", type: "text" })
  csrfToken!: string;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ name: "expires_at", type: "timestamptz" })
  expiresAt!: Date;
}
