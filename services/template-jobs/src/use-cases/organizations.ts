import type { TemplateJobsContext } from "../context";
import { jobsRepository } from "../db/repositories/jobs.repository";
import { organizationsRepository, type OrganizationCopy } from "../db/repositories/organizations.repository";
import { announceStopped } from "./jobs";

/**
 * `sys.organization.upserted.v1`: keeps the organization's plan. An `inactive` organization's jobs stop sending
 * (ADR 0022): the runner neither claims nor renews them, and messaging is told to hold their batch sends not gone
 * yet (which then wait, as a paused job's do, until the plan changes). Any other plan lets them go on.
 */
export async function syncOrganization(ctx: TemplateJobsContext, org: OrganizationCopy): Promise<void> {
  const stored = await organizationsRepository.upsert(ctx.db, org);
  if (stored && org.plan === "inactive") announceStopped(ctx, await jobsRepository.activeIdsOf(ctx.db, org.id));
}
