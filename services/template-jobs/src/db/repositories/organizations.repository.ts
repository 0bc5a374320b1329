import type { OrganizationUpserted } from "@platform/contracts";
import type { z } from "zod";
import { run, SCHEMA, type Queryable } from "./queryable";

/** What template-jobs keeps of an organization: its plan (ADR 0022). */
export type OrganizationCopy = Pick<z.infer<typeof OrganizationUpserted>, "id" | "plan" | "updatedAt">;

/** SQL condition: the organization `column` names is not `inactive` (no copy yet counts as active). */
export const organizationActive = (column: string) =>
  `NOT EXISTS (SELECT 1 FROM ${SCHEMA}.organizations o WHERE o.id = ${column} AND o.plan = 'inactive')`;

export const organizationsRepository = {
  /** Stores the copy; an older one (by the gateway's `updatedAt`) never replaces a newer one. True when stored. */
  async upsert(q: Queryable, o: OrganizationCopy): Promise<boolean> {
    const rows = await run(
      q,
      `INSERT INTO ${SCHEMA}.organizations AS org (id, plan, source_updated_at) VALUES ($1, $2, $3)
       ON CONFLICT (id) DO UPDATE SET plan = EXCLUDED.plan, source_updated_at = EXCLUDED.source_updated_at, synced_at = now()
         WHERE org.source_updated_at <= EXCLUDED.source_updated_at
       RETURNING id`,
      [o.id, o.plan, o.updatedAt],
    );
    return rows.length > 0;
  },

  async isInactive(q: Queryable, organizationId: string): Promise<boolean> {
    const rows = await run(q, `SELECT 1 FROM ${SCHEMA}.organizations WHERE id = $1 AND plan = 'inactive'`, [organizationId]);
    return rows.length > 0;
  },
};
