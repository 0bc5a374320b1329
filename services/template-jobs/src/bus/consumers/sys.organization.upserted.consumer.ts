import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { TemplateJobsContext } from "../../context";
import { syncOrganization } from "../../use-cases/organizations";

/** `sys.organization.upserted.v1` (gateway) → the organization's plan: an `inactive` one's jobs do not send (ADR 0022). */
export async function consumeOrganizationUpserted(ctx: TemplateJobsContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.system,
    durable: "template-jobs-organization-upserted",
    subject: SUBJECTS.organizationUpserted,
    concurrency: 4,
    handler: (org) => syncOrganization(ctx, org),
  });
}
