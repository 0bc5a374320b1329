import { Column, Entity, PrimaryColumn } from "typeorm";

/** GCRA state of one channel: `tat` is the theoretical arrival time of the next send (docs/adr/0003). */
@Entity({ name: "channel_pacing" })
export class ChannelPacingEntity {
  @PrimaryColumn({ name: "channel_id", type: "text" }) channelId!: string;
  @Column({ name: "messages_per_second", type: "integer" }) messagesPerSecond!: number;
  @Column({ type: "timestamptz" }) tat!: Date;
  /** The adaptive rate right after the last 130429 decrease (null: never decreased); it climbs back from there. */
  @Column({ type: "double precision", nullable: true }) rate!: number | null;
  @Column({ name: "decreased_at", type: "timestamptz", nullable: true }) decreasedAt!: Date | null;
}
