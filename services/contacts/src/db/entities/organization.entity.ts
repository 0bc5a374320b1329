import { Column, Entity, PrimaryColumn } from "typeorm";

/** Local copy of what contacts needs of an organization (from sys.organization.upserted). */
@Entity({ name: "organizations" })
export class OrganizationEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "opt_out_keywords", type: "text", array: true })
  optOutKeywords!: string[];

  @Column({ type: "boolean" })
  deleted!: boolean;

  /** `updatedAt` of the copied organization: older upserts never overwrite newer ones. */
  @Column({ name: "source_updated_at", type: "timestamptz" })
  sourceUpdatedAt!: Date;

  @Column({ name: "synced_at", type: "timestamptz" })
  syncedAt!: Date;
}
