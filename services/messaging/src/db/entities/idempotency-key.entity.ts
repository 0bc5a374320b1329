import { Column, Entity, PrimaryColumn } from "typeorm";

/** One `Idempotency-Key` of an organization: the request's hash and, once done, the first answer. */
@Entity({ name: "idempotency_keys" })
export class IdempotencyKeyEntity {
  @PrimaryColumn({ name: "organization_id", type: "text" }) organizationId!: string;
  @PrimaryColumn({ type: "text" }) key!: string;
  @Column({ name: "request_hash", type: "text" }) requestHash!: string;
  @Column({ type: "text" }) state!: "processing" | "done";
  @Column({ name: "response_status", type: "integer", nullable: true }) responseStatus!: number | null;
  @Column({ name: "response_body", type: "json", nullable: true }) responseBody!: unknown;
  @Column({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @Column({ name: "expires_at", type: "timestamptz" }) expiresAt!: Date;
}
