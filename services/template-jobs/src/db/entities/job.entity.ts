import { Column, Entity, PrimaryColumn } from "typeorm";

/** A template send job: its settings, progress counters, schedule, throttle slot and the lease of the replica running it. */
@Entity({ name: "jobs" })
export class JobEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ name: "template_id", type: "text" }) templateId!: string;
  @Column({ name: "messaging_channel_id", type: "text" }) messagingChannelId!: string;
  @Column({ type: "text" }) status!: string;
  @Column({ name: "header_media", type: "jsonb", nullable: true }) headerMedia!: unknown;
  @Column({ type: "integer" }) recipients!: number;
  @Column({ type: "integer" }) sent!: number;
  @Column({ type: "integer" }) failed!: number;
  @Column({ type: "integer" }) skipped!: number;
  @Column({ name: "scheduled_for", type: "timestamptz", nullable: true }) scheduledFor!: Date | null;
  @Column({ name: "throttle_per_hour", type: "integer", nullable: true }) throttlePerHour!: number | null;
  /** The throttle's next free slot: survives restarts, so pacing does not restart from zero. */
  @Column({ name: "next_slot_at", type: "timestamptz", nullable: true }) nextSlotAt!: Date | null;
  @Column({ name: "opt_outs_checked", type: "boolean" }) optOutsChecked!: boolean;
  @Column({ name: "lease_owner", type: "text", nullable: true }) leaseOwner!: string | null;
  @Column({ name: "lease_until", type: "timestamptz", nullable: true }) leaseUntil!: Date | null;
  @Column({ name: "run_after", type: "timestamptz", nullable: true }) runAfter!: Date | null;
  /** A cancelled job's recipients left `sending` by a dead run are settled from messaging's outcomes after this (ADR 0018). */
  @Column({ name: "settle_after", type: "timestamptz", nullable: true }) settleAfter!: Date | null;
  /** How a job a run holds is to end (`cancelled`, `failed`): it takes that status once the run lets go (ADR 0023). */
  @Column({ name: "stop_as", type: "text", nullable: true }) stopAs!: string | null;
  @Column({ name: "started_at", type: "timestamptz", nullable: true }) startedAt!: Date | null;
  @Column({ name: "completed_at", type: "timestamptz", nullable: true }) completedAt!: Date | null;
  @Column({ name: "failure_reason", type: "text", nullable: true }) failureReason!: string | null;
  @Column({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @Column({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
