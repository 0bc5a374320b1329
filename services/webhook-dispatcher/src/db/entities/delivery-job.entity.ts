import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from "typeorm";

/**
 * The next attempt owed for one (event, webhook): attempt 1 when the event
 * arrives, then each pending retry. Durable, so a restart loses none; a
 * worker claims one by pushing `due_at` past the attempt's timeout (a lease),
 * naming itself in `lease_owner`: a process whose beat in `dispatchers` has
 * stopped loses its leases at once (ADR 0019).
 */
@Entity({ name: "delivery_jobs", schema: "webhooks" })
export class DeliveryJobEntity {
  @PrimaryGeneratedColumn({ type: "bigint" }) id!: string;
  @Column({ name: "event_id", type: "text" }) eventId!: string;
  @Column({ name: "webhook_id", type: "text" }) webhookId!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ type: "integer", default: 1 }) attempt!: number;
  @Column({ name: "due_at", type: "timestamptz" }) dueAt!: Date;
  @Column({ name: "lease_owner", type: "text", nullable: true }) leaseOwner!: string | null;
  @CreateDateColumn({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
}
