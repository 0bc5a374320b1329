import { Column, Entity, PrimaryColumn } from "typeorm";

@Entity({ name: "organizations" })
export class OrganizationEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ type: "text" })
  name!: string;

  @Column({ type: "text" })
  plan!: "growth" | "starter" | "inactive";

  /** Null: the platform default (RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST). */
  @Column({ name: "rate_limit_per_second", type: "integer", nullable: true })
  rateLimitPerSecond!: number | null;

  @Column({ name: "rate_limit_burst", type: "integer", nullable: true })
  rateLimitBurst!: number | null;

  /** Null: the default keyword list. */
  @Column({ name: "opt_out_keywords", type: "text", array: true, nullable: true })
  optOutKeywords!: string[] | null;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ name: "updated_at", type: "timestamptz" })
  updatedAt!: Date;
}
