import { Column, Entity, PrimaryColumn } from "typeorm";

/** The keyed endpoint an organization's `Idempotency-Key` was first used on, until `expiresAt` (ADR 0021). */
@Entity({ name: "idempotency_scopes" })
export class IdempotencyScopeEntity {
  @PrimaryColumn({ name: "organization_id", type: "text" })
  organizationId!: string;

  @PrimaryColumn({ type: "text" })
  key!: string;

  /** `messages` or `templates/send`. */
  @Column({ type: "text" })
  endpoint!: string;

  @Column({ name: "expires_at", type: "timestamptz" })
  expiresAt!: Date;
}
