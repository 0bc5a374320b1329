import { Column, Entity, PrimaryColumn } from "typeorm";

/** One contact per (organization, E.164 phone). */
@Entity({ name: "contacts" })
export class ContactEntity {
  @PrimaryColumn({ type: "text" })
  id!: string;

  @Column({ name: "organization_id", type: "text" })
  organizationId!: string;

  @Column({ type: "text" })
  phone!: string;

  @Column({ name: "wa_id", type: "text", nullable: true })
  waId!: string | null;

  @Column({ type: "text", nullable: true })
  name!: string | null;

  @Column({ type: "text", nullable: true })
  email!: string | null;

  @Column({ name: "created_at", type: "timestamptz" })
  createdAt!: Date;

  @Column({ name: "updated_at", type: "timestamptz" })
  updatedAt!: Date;
}
