import { Column, Entity, PrimaryColumn } from "typeorm";

/** GCRA state of one channel: `tat` is the theoretical arrival time of the next send (docs/adr/0003). */
@Entity({ name: "channel_pacing" })
export class ChannelPacingEntity {
  @PrimaryColumn({ name: "channel_id", type: "text" }) channelId!: string;
  @Column({ name: "messages_per_second", type: "integer" }) messagesPerSecond!: number;
  @Column({ type: "timestamptz" }) tat!: Date;
  /** Until then the channel sends at half its rate (the provider answered 130429). */
  @Column({ name: "slowed_until", type: "timestamptz", nullable: true }) slowedUntil!: Date | null;
}
