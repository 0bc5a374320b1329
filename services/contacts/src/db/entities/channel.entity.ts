import { Column, Entity, PrimaryColumn } from "typeorm";

/** Local copy of a messaging channel (owned by messaging; from sys.channel.upserted or RPC lookup). */
@Entity({ name: "channels" })
export class ChannelEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  @Column({ type: "text" })
  name!: string;

  @Column({ name: "phone_number", type: "text" })
  phoneNumber!: string;

  @Column({ name: "provider_phone_number_id", type: "text" })
  providerPhoneNumberId!: string;

  @Column({ type: "boolean" })
  connected!: boolean;

  @Column({ name: "is_default", type: "boolean" })
  isDefault!: boolean;

  @Column({ name: "messages_per_second", type: "integer" })
  messagesPerSecond!: number;

  /** `updatedAt` of the copied channel: older upserts never overwrite newer ones. */
  @Column({ name: "source_updated_at", type: "timestamptz" })
  sourceUpdatedAt!: Date;

  @Column({ name: "synced_at", type: "timestamptz" })
  syncedAt!: Date;
}
