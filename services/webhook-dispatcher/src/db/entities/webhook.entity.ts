import { Column, CreateDateColumn, Entity, PrimaryColumn, UpdateDateColumn } from "typeorm";

/** A subscription of one organization: where to POST which event types, signed with its secret. */
@Entity({ name: "webhooks", schema: "webhooks" })
export class WebhookEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ type: "text" }) url!: string;
  @Column({ type: "text", array: true }) events!: string[];
  /** `whsec_…`; never selected unless asked for (signing), never logged, returned once at creation. */
  @Column({ type: "text", select: false }) secret!: string;
  @Column({ type: "boolean", default: true }) active!: boolean;
  @Column({ name: "consecutive_failures", type: "integer", default: 0 }) consecutiveFailures!: number;
  @Column({ name: "deactivated_at", type: "timestamptz", nullable: true }) deactivatedAt!: Date | null;
  @CreateDateColumn({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
