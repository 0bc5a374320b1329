import type { ChannelCopy } from "../db/repositories/channels.repository";
import type { OrganizationCopy } from "../db/repositories/organizations.repository";
import type { ContactsContext } from "./context";

/** Keeps the local copy of an organization (its opt-out keywords) current. */
export async function syncOrganization(ctx: ContactsContext, org: OrganizationCopy): Promise<void> {
  await ctx.organizations.upsert(org);
}

/** Keeps the local copy of a messaging channel current. */
export async function syncChannel(ctx: ContactsContext, channel: ChannelCopy): Promise<void> {
  await ctx.channels.upsert(channel);
}
