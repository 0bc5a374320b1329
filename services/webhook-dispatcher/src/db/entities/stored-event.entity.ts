import { Column, CreateDateColumn, Entity, PrimaryColumn } from "typeorm";

/** A domain event owed to at least one webhook, with the exact body bytes every attempt sends. */
@Entity({ name: "events", schema: "webhooks" })
export class StoredEventEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ type: "text" }) event!: string;
  @Column({ type: "text" }) body!: string;
  @CreateDateColumn({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
}
