import { Column, CreateDateColumn, Entity, PrimaryColumn } from "typeorm";

/** One POST to a webhook (the attempt log of the application screen); `id` is its `X-Service-Delivery`. */
@Entity({ name: "delivery_attempts", schema: "webhooks" })
export class DeliveryAttemptEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "webhook_id", type: "text" }) webhookId!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ name: "event_id", type: "text" }) eventId!: string;
  @Column({ type: "text" }) event!: string;
  @Column({ type: "integer" }) attempt!: number;
  @Column({ name: "response_status", type: "integer", nullable: true }) responseStatus!: number | null;
  @Column({ name: "response_body", type: "text", nullable: true }) responseBody!: string | null;
  @Column({ type: "text", nullable: true }) error!: string | null;
  @Column({ name: "duration_ms", type: "integer", nullable: true }) durationMs!: number | null;
  @CreateDateColumn({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
}
