import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { ContactsContext } from "../../use-cases/context";
import { syncOrganization } from "../../use-cases/sync-copies";

/** sys.organization.upserted.v1 (gateway) → the organization's opt-out keywords. */
export async function consumeOrganizationUpserted(ctx: ContactsContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.system,
    durable: "contacts-organization-upserted",
    subject: SUBJECTS.organizationUpserted,
    concurrency: 4,
    handler: (org) => syncOrganization(ctx, org),
  });
}
