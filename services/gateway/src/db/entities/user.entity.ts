import { Column, Entity, PrimaryColumn } from "typeorm";

@Entity({ name: "users" })
export class UserEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  /** Lower-cased; one user belongs to one organization, so the email alone signs in. */
  @Column({ type: "text" })
  email!: string;

  @Column({ type: "text" })
  role!: "owner" | "admin" | "member";

  /** `scrypt$N$r$p$salt$hash` (base64url). */
  @Column({ name: "password_hash", type: "text", select: false })
  passwordHash!: string;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;
}
