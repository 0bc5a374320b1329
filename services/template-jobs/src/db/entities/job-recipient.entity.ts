import { Column, Entity, PrimaryColumn } from "typeorm";

/**
 * One recipient of a job: `pending` → `sending` (claimed, in a transaction) →
 * `sent` / `failed` / `skipped`, or `waiting` while messaging retries it and
 * its final `message.*` event is awaited; `cancelled` when the job's cancel
 * stopped its send in messaging before it reached the provider (uncounted).
 * Its send's idempotency key is `job:<jobId>:<seq>`.
 */
@Entity({ name: "job_recipients" })
export class JobRecipientEntity {
  @PrimaryColumn({ name: "job_id", type: "text" }) jobId!: string;
  @PrimaryColumn({ type: "integer" }) seq!: number;
  @Column({ type: "text" }) phone!: string;
  @Column({ name: "contact_id", type: "text", nullable: true }) contactId!: string | null;
  @Column({ name: "body_parameters", type: "jsonb" }) bodyParameters!: string[];
  @Column({ name: "button_parameters", type: "jsonb" }) buttonParameters!: unknown[];
  @Column({ type: "text" }) state!: string;
  @Column({ name: "message_id", type: "text", nullable: true }) messageId!: string | null;
  /** When the throttle allowed this send (throttled jobs only): the schedule the runner decided. */
  @Column({ name: "slot_at", type: "timestamptz", nullable: true }) slotAt!: Date | null;
  @Column({ type: "integer" }) attempts!: number;
  @Column({ name: "error_code", type: "text", nullable: true }) errorCode!: string | null;
  @Column({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
