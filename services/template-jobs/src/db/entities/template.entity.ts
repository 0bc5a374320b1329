import { Column, Entity, PrimaryColumn } from "typeorm";

/** An approved-or-not provider template of an organization (contract section 3). */
@Entity({ name: "templates" })
export class TemplateEntity {
  @PrimaryColumn({ type: "text" }) id!: string;
  @Column({ name: "organization_id", type: "text" }) organizationId!: string;
  @Column({ type: "text" }) name!: string;
  @Column({ type: "text" }) language!: string;
  @Column({ type: "text", nullable: true }) category!: string | null;
  @Column({ type: "text" }) status!: string;
  @Column({ name: "body_parameter_count", type: "integer" }) bodyParameterCount!: number;
  @Column({ name: "provider_template_id", type: "text" }) providerTemplateId!: string;
  @Column({ name: "template_account_id", type: "text" }) templateAccountId!: string;
  @Column({ name: "header_format", type: "text", nullable: true }) headerFormat!: string | null;
  @Column({ name: "created_at", type: "timestamptz" }) createdAt!: Date;
  @Column({ name: "updated_at", type: "timestamptz" }) updatedAt!: Date;
}
