import { Column, Entity, PrimaryColumn } from "typeorm";

/** Provider timestamp of the last inbound message per (channel, phone): the 24-hour service window. */
@Entity({ name: "service_windows" })
export class ServiceWindowEntity {
  @PrimaryColumn({ name: "channel_id", type: "text" }) channelId!: string;
  @PrimaryColumn({ type: "text" }) phone!: string;
  @Column({ name: "last_inbound_at", type: "timestamptz" }) lastInboundAt!: Date;
}
