import { Column, Entity, PrimaryColumn } from "typeorm";

export type BucketGranularity = "h" | "d" | "m";

/** Messages of one organization created in one UTC hour, day or month, by current status. */
@Entity({ name: "buckets" })
export class BucketEntity {
  @PrimaryColumn({ name: "organization_id", type: "text" })
  organizationId!: string;

  @PrimaryColumn({ type: "char" })
  granularity!: BucketGranularity;

  @PrimaryColumn({ name: "bucket_start", type: "timestamptz" })
  bucketStart!: Date;

  @PrimaryColumn({ type: "text" })
  status!: string;

  @Column({ type: "bigint" })
  count!: string;
}
