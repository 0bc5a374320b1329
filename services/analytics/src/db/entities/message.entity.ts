import { Column, Entity, PrimaryColumn } from "typeorm";

/** One outbound message as analytics knows it: its creation time and current status (from the message events). */
@Entity({ name: "messages" })
export class MessageEntity {
  @PrimaryColumn({ name: "organization_id", type: "text" })
  organizationId!: string;

  @PrimaryColumn({ name: "message_id", type: "text" })
  messageId!: string;

  /** `createdAt` of the message in messaging (from the event data), at millisecond precision. */
  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ type: "text" })
  status!: string;

  /** Forward-only order of `status` (pending 0, sent 1, delivered 2, read and failed 3). */
  @Column({ type: "smallint" })
  rank!: number;

  @Column({ name: "updated_at", type: "timestamptz" })
  updatedAt!: Date;
}
