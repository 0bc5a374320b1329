import { Column, Entity, PrimaryColumn } from "typeorm";

/** What a template message's provider body is built from (contract section 4). */
export interface TemplatePayload {
  template: { name: string; language: string; headerFormat: "image" | "video" | "document" | null };
  headerMedia: { url: string; fileName?: string } | null;
  bodyParameters: string[];
  buttonParameters: Array<{ type: "quick_reply"; payload: string; index?: number } | { type: "url"; text: string; index?: number }>;
}

export type MessageDirection = "inbound" | "outbound";
/** `received` for inbound; outbound: `pending` → `sent` → `delivered` → `read`, or `failed`. */
/** `cancelled`: a template send its job's cancel ended before it reached the provider (final, no public event). */
export type MessageStatus = "received" | "pending" | "sent" | "delivered" | "read" | "failed" | "cancelled";

@Entity({ name: "messages" })
export class MessageEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ name: "channel_id", type: "text" }) channelId!: string;
  @Column({ name: "conversation_id", type: "text" }) conversationId!: string;
  @Column({ name: "contact_id", type: "text" }) contactId!: string;
  @Column({ type: "text" }) phone!: string;
  @Column({ type: "text" }) direction!: MessageDirection;
  @Column({ type: "text" }) type!: string;
  @Column({ type: "text", nullable: true }) text!: string | null;
  @Column({ name: "button_text", type: "text", nullable: true }) buttonText!: string | null;
  @Column({ name: "button_payload", type: "text", nullable: true }) buttonPayload!: string | null;
  @Column({ type: "text" }) status!: MessageStatus;
  @Column({ name: "provider_message_id", type: "text", nullable: true }) providerMessageId!: string | null;
  @Column({ name: "provider_timestamp", type: "timestamptz", nullable: true }) providerTimestamp!: Date | null;
  @Column({ name: "template_job_id", type: "text", nullable: true }) templateJobId!: string | null;
  /** Idempotency key of a template send (`job:<jobId>:<recipientId>`), unique per organization. */
  @Column({ name: "send_key", type: "text", nullable: true }) sendKey!: string | null;
  /** Template, header media and parameters of a template send: what a retry needs to rebuild its body. */
  @Column({ name: "template_payload", type: "jsonb", nullable: true }) templatePayload!: TemplatePayload | null;
  @Column({ name: "error_code", type: "text", nullable: true }) errorCode!: string | null;
  @Column({ name: "error_title", type: "text", nullable: true }) errorTitle!: string | null;
  /** Provider calls made so far; the attempt number is also the lease owner's token. */
  @Column({ type: "integer" }) attempts!: number;
  /**
   * Of those attempts, the ones that failed (a transient provider failure, no answer, the channel off, the opt-out check
   * down): the exponent of the retry backoff. An attempt deferred for its pacing slot, a paused job or its lease is
   * not a failure, and does not lengthen the next wait.
   */
  @Column({ type: "integer", default: 0 }) failures!: number;
  /** While in the future, one sender (request or retry worker) owns the provider call. */
  @Column({ name: "lease_until", type: "timestamptz", nullable: true }) leaseUntil!: Date | null;
  @Column({ name: "next_attempt_at", type: "timestamptz", nullable: true }) nextAttemptAt!: Date | null;
  @Column({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @Column({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
