import type { DataSource } from "typeorm";
import type { z } from "zod";
import type { OrganizationUpserted } from "@platform/contracts";
import { OrganizationEntity } from "../entities/organization.entity";

export type OrganizationCopy = z.infer<typeof OrganizationUpserted>;

/** The local copy of organizations: what contacts needs of them (opt-out keywords). */
export class OrganizationsRepository {
  constructor(private readonly db: DataSource) {}

  async findById(id: string): Promise<OrganizationEntity | null> {
    return this.db.getRepository(OrganizationEntity).findOneBy({ id });
  }

  /** Stores an organization; an older copy (by its own `updatedAt`) never replaces a newer one. */
  async upsert(o: OrganizationCopy): Promise<void> {
    await this.db.query(
      `INSERT INTO contacts.organizations AS org (id, opt_out_keywords, deleted, source_updated_at)
       VALUES ($1, $2::text[], $3, $4)
       ON CONFLICT (id) DO UPDATE
         SET opt_out_keywords = EXCLUDED.opt_out_keywords, deleted = EXCLUDED.deleted,
             source_updated_at = EXCLUDED.source_updated_at, synced_at = now()
         WHERE org.source_updated_at <= EXCLUDED.source_updated_at`,
      [o.id, o.optOutKeywords, o.deleted, o.updatedAt],
    );
  }
}
