import { run, SCHEMA, type Queryable } from "./queryable";

export interface TemplateRow {
  id: string;
  organization_id: string;
  name: string;
  language: string;
  category: string | null;
  status: string;
  body_parameter_count: number;
  provider_template_id: string;
  template_account_id: string;
  header_format: "image" | "video" | "document" | null;
  created_at: Date;
  updated_at: Date;
}

export const templatesRepository = {
  /** Inserts a template; null when (organization, provider template id) is taken. */
  async insert(q: Queryable, row: Omit<TemplateRow, "created_at" | "updated_at">): Promise<TemplateRow | null> {
    const rows = await run<TemplateRow>(
      q,
      // One instant for both stamps: the column defaults read two clocks (`created_at` the statement's, `updated_at`
      // the transaction's start), which left `updatedAt` a few ms before `createdAt`.
      `INSERT INTO ${SCHEMA}.templates (id, organization_id, name, language, category, status, body_parameter_count,
         provider_template_id, template_account_id, header_format, created_at, updated_at)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, t.at, t.at FROM (SELECT date_trunc('milliseconds', clock_timestamp()) AS at) t
       ON CONFLICT (organization_id, provider_template_id) DO NOTHING
       RETURNING *`,
      [row.id, row.organization_id, row.name, row.language, row.category, row.status, row.body_parameter_count,
        row.provider_template_id, row.template_account_id, row.header_format],
    );
    return rows[0] ?? null;
  },

  async byId(q: Queryable, organizationId: string, id: string): Promise<TemplateRow | null> {
    const rows = await run<TemplateRow>(q, `SELECT * FROM ${SCHEMA}.templates WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ?? null;
  },

  async byProviderId(q: Queryable, organizationId: string, providerTemplateId: string, templateAccountId: string): Promise<TemplateRow | null> {
    const rows = await run<TemplateRow>(
      q,
      `SELECT * FROM ${SCHEMA}.templates WHERE organization_id = $1 AND provider_template_id = $2 AND template_account_id = $3`,
      [organizationId, providerTemplateId, templateAccountId],
    );
    return rows[0] ?? null;
  },

  /** Every organization's template of this provider account and id, locked for a status change. */
  async lockByProvider(q: Queryable, templateAccountId: string, providerTemplateId: string): Promise<TemplateRow[]> {
    return run<TemplateRow>(
      q,
      `SELECT * FROM ${SCHEMA}.templates WHERE template_account_id = $1 AND provider_template_id = $2 ORDER BY id FOR UPDATE`,
      [templateAccountId, providerTemplateId],
    );
  },

  async setStatus(q: Queryable, id: string, status: string): Promise<void> {
    await run(q, `UPDATE ${SCHEMA}.templates SET status = $2, updated_at = now() WHERE id = $1`, [id, status]);
  },

  async page(q: Queryable, organizationId: string, after: { createdAt: string; id: string } | null, limit: number): Promise<TemplateRow[]> {
    return after
      ? run<TemplateRow>(
          q,
          `SELECT * FROM ${SCHEMA}.templates WHERE organization_id = $1 AND (created_at, id) > ($2::timestamptz, $3)
           ORDER BY created_at, id LIMIT $4`,
          [organizationId, after.createdAt, after.id, limit],
        )
      : run<TemplateRow>(q, `SELECT * FROM ${SCHEMA}.templates WHERE organization_id = $1 ORDER BY created_at, id LIMIT $2`, [organizationId, limit]);
  },
};

/** A template by id alone (the runner reads its job's template). */
export async function templateById(q: Queryable, id: string): Promise<TemplateRow | null> {
  const rows = await run<TemplateRow>(q, `SELECT * FROM ${SCHEMA}.templates WHERE id = $1`, [id]);
  return rows[0] ?? null;
}
