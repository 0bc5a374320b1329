import { Column, Entity, PrimaryColumn } from "typeorm";

/** A dispatcher process and how long it is known to be alive: it beats every few seconds (ADR 0019). */
@Entity({ name: "dispatchers", schema: "webhooks" })
export class DispatcherEntity {
  @PrimaryColumn({ type: "text" }) owner!: string;
  @Column({ name: "alive_until", type: "timestamptz" }) aliveUntil!: Date;
}
