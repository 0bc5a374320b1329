import { Column, Entity, PrimaryColumn } from "typeorm";

export type OptOutSource = "keyword" | "api" | "manual";

/** The opt-out of one (organization, channel, phone): one record, revoked and reactivated in place. */
@Entity({ name: "opt_outs" })
export class OptOutEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  @Column({ name: "messaging_channel_id", type: "text" })
  messagingChannelId!: string;

  @Column({ type: "text" })
  phone!: string;

  @Column({ type: "boolean" })
  active!: boolean;

  /** Source of the latest transition into active. */
  @Column({ type: "text" })
  source!: OptOutSource;

  @Column({ type: "text", nullable: true })
  keyword!: string | null;

  @Column({ type: "text", nullable: true })
  reason!: string | null;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ name: "updated_at", type: "timestamptz" })
  updatedAt!: Date;

  @Column({ name: "revoked_at", type: "timestamptz", nullable: true })
  revokedAt!: Date | null;
}
