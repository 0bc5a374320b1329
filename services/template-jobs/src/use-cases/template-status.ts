import { parseProviderJson, ProviderWebhookChange, ProviderWebhookEntries, ProviderWebhookEntry, type TemplateStatus } from "@platform/contracts";
import { domainEvent, enqueue, PermanentError } from "@platform/bus";
import type { TemplateJobsContext } from "../context";
import { jobsRepository } from "../db/repositories/jobs.repository";
import { templatesRepository } from "../db/repositories/templates.repository";
import { announceStopped } from "./jobs";

/**
 * The provider's `event` of a `message_template_status_update` → our status. A template deleted at the provider (or
 * being deleted) can never be sent again: `disabled`, so its jobs end `failed` and a new send is TEMPLATE_NOT_APPROVED.
 * The others (FLAGGED, LIMIT_EXCEEDED: a warning and a quota, the template still sends) change nothing.
 */
const PROVIDER_STATUS: Record<string, TemplateStatus> = {
  APPROVED: "approved",
  REINSTATED: "approved",
  REJECTED: "rejected",
  PAUSED: "paused",
  DISABLED: "disabled",
  PENDING_DELETION: "disabled",
  DELETED: "disabled",
  PENDING: "pending",
  IN_APPEAL: "pending",
};

export interface TemplateStatusChange {
  templateAccountId: string;
  providerTemplateId: string;
  status: TemplateStatus;
  reason: string | null;
}

/** The template status changes of a raw provider batch (`provider.inbound.v1`); message changes are messaging's. */
export function templateStatusChanges(rawBody: string): TemplateStatusChange[] {
  let parsed;
  try {
    parsed = ProviderWebhookEntries.parse(parseProviderJson(rawBody));
  } catch (err) {
    throw new PermanentError(`unreadable provider batch: ${(err as Error).message}`);
  }
  const out: TemplateStatusChange[] = [];
  // Entry by entry, change by change, as messaging reads its own: one unreadable item never drops the others.
  for (const rawEntry of parsed.entry) {
    const entry = ProviderWebhookEntry.safeParse(rawEntry);
    if (!entry.success) continue;
    for (const rawChange of entry.data.changes ?? []) {
      const change = ProviderWebhookChange.safeParse(rawChange);
      if (!change.success || change.data.field !== "message_template_status_update") continue;
      const value = (change.data.value ?? {}) as Record<string, unknown>;
      const status = PROVIDER_STATUS[String(value.event ?? "").toUpperCase()];
      const providerTemplateId = value.message_template_id;
      const templateAccountId = entry.data.id;
      if (!status || !templateAccountId || (typeof providerTemplateId !== "string" && typeof providerTemplateId !== "number")) continue;
      const reason = typeof value.reason === "string" && value.reason && value.reason.toUpperCase() !== "NONE" ? value.reason : null;
      out.push({ templateAccountId, providerTemplateId: String(providerTemplateId), status, reason });
    }
  }
  return out;
}

/**
 * Moves every template of (account, provider id) to `status`, in one
 * transaction with its `template.status_updated` event (outbox) and its jobs:
 * `paused` pauses running jobs, `approved` resumes paused ones, `rejected` or
 * `disabled` fails the unfinished ones. A template already in that status
 * changes nothing and emits nothing, so a redelivered batch is a no-op; a
 * move to `pending` is stored but emits nothing (not a value of the event).
 */
export async function applyTemplateStatus(
  ctx: TemplateJobsContext,
  templateAccountId: string,
  providerTemplateId: string,
  status: TemplateStatus,
  reason: string | null,
  onlyOrganizationId?: string,
): Promise<number> {
  const stopped: string[] = [];
  const changedCount = await ctx.db.transaction(async (m) => {
    const templates = (await templatesRepository.lockByProvider(m, templateAccountId, providerTemplateId)).filter(
      (t) => onlyOrganizationId === undefined || t.organization_id === onlyOrganizationId,
    );
    let changed = 0;
    for (const t of templates) {
      if (t.status === status) continue;
      changed++;
      await templatesRepository.setStatus(m, t.id, status);
      stopped.push(...(await jobsRepository.followTemplate(m, t.id, status)));
      // `template.status_updated` carries `approved`, `rejected`, `paused` or `disabled` (service-spec.md, events):
      // a template back in review (`pending`) is stored, and announced by the event of its next decision.
      if (status === "pending") continue;
      await enqueue(m, "template_jobs", [
        domainEvent("template.status_updated", t.organization_id, {
          templateId: t.id,
          providerTemplateId: t.provider_template_id,
          name: t.name,
          language: t.language,
          status,
          previousStatus: t.status,
          reason,
        }),
      ]);
    }
    return changed;
  });
  announceStopped(ctx, stopped);
  return changedCount;
}

/** Handles one provider batch from the bus. */
export async function processTemplateStatusBatch(ctx: TemplateJobsContext, rawBody: string): Promise<void> {
  for (const change of templateStatusChanges(rawBody)) {
    const changed = await applyTemplateStatus(ctx, change.templateAccountId, change.providerTemplateId, change.status, change.reason);
    if (changed === 0) ctx.log.debug({ ...change }, "template status update changed nothing");
  }
}
