import { Column, Entity, PrimaryColumn } from "typeorm";

@Entity({ name: "api_keys" })
export class ApiKeyEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  @Column({ type: "text" })
  name!: string;

  /** SHA-256 of the key (hex). The key itself is never stored. */
  @Column({ name: "key_hash", type: "text", select: false })
  keyHash!: string;

  @Column({ name: "key_prefix", type: "text" })
  keyPrefix!: string;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ name: "last_used_at", type: "timestamptz", nullable: true })
  lastUsedAt!: Date | null;

  @Column({ name: "revoked_at", type: "timestamptz", nullable: true })
  revokedAt!: Date | null;
}
