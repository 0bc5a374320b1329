import { normalizePhone, type InboundForKeywords } from "@platform/contracts";
import { PermanentError } from "@platform/bus";
import type { ContactsContext } from "./context";
import { applyKeywordOptOuts } from "./keyword-opt-out";

/** A request no retry can fix, answered over the bus as VALIDATION_ERROR. */
export class InvalidRequestError extends PermanentError {
  readonly code = "VALIDATION_ERROR";
}

/**
 * The contact of (organization, phone), created on first sight (first inbound
 * or outbound message, template job recipient); `name` and `waId` are kept
 * when the caller knows them.
 */
export async function resolveContact(
  ctx: ContactsContext,
  req: { organizationId: string; phone: string; name?: string; waId?: string },
): Promise<{ contactId: string; phone: string; created: boolean }> {
  const phone = normalizePhone(req.phone);
  if (!phone) throw new InvalidRequestError(`phone ${JSON.stringify(req.phone)} is not a valid phone number`);
  return ctx.contacts.resolve(req.organizationId, phone, { name: req.name, waId: req.waId });
}

/**
 * Contacts of many E.164 numbers at once (template jobs, inbound batches with names and waIds), in the order given.
 * An inbound batch's keyword opt-outs are applied before the answer, once the senders' contacts exist (ADR 0014):
 * when messaging stores the messages, and long before the integrator hears of them, their senders are opted out.
 */
export async function resolveContacts(
  ctx: ContactsContext,
  req: { organizationId: string; phones: string[]; names?: Array<string | null>; waIds?: Array<string | null>; inbound?: InboundForKeywords[] },
): Promise<{ contactIds: string[]; created: number }> {
  const resolved = await ctx.contacts.resolveMany(req.organizationId, req.phones, { names: req.names, waIds: req.waIds });
  if (req.inbound?.length) await applyKeywordOptOuts(ctx, req.organizationId, req.inbound);
  return resolved;
}
