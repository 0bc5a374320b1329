import type { ChannelCopy } from "../db/repositories/channels.repository";
import type { OrganizationCopy } from "../db/repositories/organizations.repository";
import type { ContactsContext } from "./context";

/** Keeps the local copy of an organization (its opt-out keywords) current. */
export async function syncOrganization(ctx: ContactsContext, org: OrganizationCopy): Promise<void> {
  await ctx.organizations.upsert(org);
  // After the commit: the keyword consumer's next read sees the new list.
  ctx.keywords.evict(org.id);
}

/** Keeps the local copy of a messaging channel current. */
export async function syncChannel(ctx: ContactsContext, channel: ChannelCopy): Promise<void> {
  await ctx.channels.upsert(channel);
}
