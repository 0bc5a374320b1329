import { Column, Entity, PrimaryColumn } from "typeorm";

/** At most one open conversation per (channel, contact) (partial unique index). */
@Entity({ name: "conversations" })
export class ConversationEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ name: "channel_id", type: "text" }) channelId!: string;
  @Column({ name: "contact_id", type: "text" }) contactId!: string;
  @Column({ type: "text" }) phone!: string;
  @Column({ type: "text" }) status!: "open" | "closed";
  @Column({ name: "opened_at", type: "timestamptz" }) openedAt!: Date;
  @Column({ name: "closed_at", type: "timestamptz", nullable: true }) closedAt!: Date | null;
  @Column({ name: "last_message_at", type: "timestamptz" }) lastMessageAt!: Date;
  /** A lower bound of `lastMessageAt` the idle sweep's index reads; a message leaves it as it is (HOT touches). */
  @Column({ name: "idle_from", type: "timestamptz", default: () => "now()" }) idleFrom!: Date;
  @Column({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @Column({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
