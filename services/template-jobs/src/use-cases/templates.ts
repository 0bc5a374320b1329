import type { CreateTemplateRequest, PageQuery, Template, TemplateStatus } from "@platform/contracts";
import { iso } from "@platform/db";
import { ApiError, CursorCodec } from "@platform/http";
import { newId } from "@platform/id";
import type { TemplateJobsContext } from "../context";
import { templatesRepository, type TemplateRow } from "../db/repositories/templates.repository";
import { applyTemplateStatus } from "./template-status";

export function toTemplate(row: TemplateRow): Template {
  return {
    id: row.id,
    name: row.name,
    language: row.language,
    category: row.category,
    status: row.status as TemplateStatus,
    bodyParameterCount: row.body_parameter_count,
    providerTemplateId: row.provider_template_id,
    templateAccountId: row.template_account_id,
    headerFormat: row.header_format,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

/** POST /admin/v1/organizations/:orgId/templates: 409 CONFLICT when the provider template id is taken in the organization. */
export async function createTemplate(ctx: TemplateJobsContext, organizationId: string, body: CreateTemplateRequest): Promise<Template> {
  const row = await templatesRepository.insert(ctx.db, {
    id: newId("template"),
    organization_id: organizationId,
    name: body.name,
    language: body.language,
    category: body.category ?? null,
    status: body.status,
    body_parameter_count: body.bodyParameterCount,
    provider_template_id: body.providerTemplateId,
    template_account_id: body.templateAccountId,
    header_format: body.headerFormat ?? null,
  });
  if (!row) throw new ApiError("CONFLICT", "A template with this providerTemplateId already exists in the organization");
  return toTemplate(row);
}

/** PATCH …/templates/:id {status}: the same transition as a provider status update (event, jobs paused/resumed/failed). */
export async function updateTemplateStatus(ctx: TemplateJobsContext, organizationId: string, id: string, status: TemplateStatus): Promise<Template> {
  const existing = await templatesRepository.byId(ctx.db, organizationId, id);
  if (!existing) throw new ApiError("TEMPLATE_NOT_FOUND", "Template not found");
  await applyTemplateStatus(ctx, existing.template_account_id, existing.provider_template_id, status, null, organizationId);
  return toTemplate((await templatesRepository.byId(ctx.db, organizationId, id))!);
}

interface TemplateCursor {
  o: string;
  t: string;
  i: string;
}
const isCursor = (p: unknown): p is TemplateCursor => {
  const v = p as Partial<TemplateCursor> | null;
  return typeof v === "object" && v !== null && typeof v.o === "string" && typeof v.i === "string" && typeof v.t === "string" && !Number.isNaN(Date.parse(v.t));
};
export const templateCursorCodec = (internalToken: string) => new CursorCodec<TemplateCursor>(`templates:${internalToken}`, "templates.v1");

/** One page in (createdAt, id) order (keyset cursor bound to the organization). */
export async function listTemplates(ctx: TemplateJobsContext, organizationId: string, query: PageQuery): Promise<{ items: Template[]; nextCursor?: string }> {
  const codec = templateCursorCodec(ctx.env.INTERNAL_TOKEN);
  let after: { createdAt: string; id: string } | null = null;
  if (query.cursor !== undefined) {
    const p = codec.decode(query.cursor, (x): x is TemplateCursor => isCursor(x) && x.o === organizationId);
    after = { createdAt: p.t, id: p.i };
  }
  const rows = await templatesRepository.page(ctx.db, organizationId, after, query.limit + 1);
  const more = rows.length > query.limit;
  const items = (more ? rows.slice(0, query.limit) : rows).map(toTemplate);
  const last = items[items.length - 1];
  return { items, ...(more && last ? { nextCursor: codec.encode({ o: organizationId, t: last.createdAt, i: last.id }) } : {}) };
}
