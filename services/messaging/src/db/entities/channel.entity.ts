import { Column, Entity, PrimaryColumn } from "typeorm";

/** A sending identity: one provider phone number of an organization. */
@Entity({ name: "channels" })
export class ChannelEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ type: "text" }) name!: string;
  @Column({ name: "phone_number", type: "text" }) phoneNumber!: string;
  @Column({ name: "provider_phone_number_id", type: "text" }) providerPhoneNumberId!: string;
  @Column({ type: "boolean" }) connected!: boolean;
  @Column({ name: "is_default", type: "boolean" }) isDefault!: boolean;
  @Column({ name: "messages_per_second", type: "integer" }) messagesPerSecond!: number;
  @Column({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @Column({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
