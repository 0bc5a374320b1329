import { DEFAULT_OPT_OUT_KEYWORDS, normalizePhone, type EventData } from "@platform/contracts";
import { PermanentError } from "@platform/bus";
import type { ContactsContext } from "./context";
import { activateOptOut } from "./opt-outs";

const fold = (s: string) => s.trim().normalize("NFC").toUpperCase();

/**
 * The keyword of `keywords` that the whole message is, or null. The whole
 * trimmed text must equal a keyword, case-insensitively and with its exact
 * spelling: "Please STOP sending" or "STOPP" never match.
 */
export function matchOptOutKeyword(text: string, keywords: readonly string[]): string | null {
  const t = fold(text);
  if (!t) return null;
  for (const k of keywords) if (fold(k) === t) return k.trim();
  return null;
}

/** The organization's keyword list: its own when copied, else the default one. */
export async function keywordsOf(ctx: ContactsContext, organizationId: string): Promise<readonly string[]> {
  const org = await ctx.organizations.findById(organizationId);
  return org ? org.optOutKeywords : DEFAULT_OPT_OUT_KEYWORDS;
}

/**
 * An inbound message: a text that is exactly an opt-out keyword opts the
 * sender out of the channel it arrived on. Button replies never do (they go
 * to the integrator's own handling). A redelivered message changes nothing.
 */
export async function handleInboundMessage(
  ctx: ContactsContext,
  organizationId: string,
  data: EventData<"message.received">,
): Promise<{ optOutId: string; keyword: string } | null> {
  if (data.type !== "text" || typeof data.text !== "string") return null;
  const keyword = matchOptOutKeyword(data.text, await keywordsOf(ctx, organizationId));
  if (!keyword) return null;
  const phone = normalizePhone(data.phone);
  if (!phone) throw new PermanentError(`message ${data.messageId}: phone is not E.164`);
  return ctx.db.transaction(async (manager) => {
    if (!(await ctx.keywordMessages.claim(manager, organizationId, data.messageId))) return null;
    const record = await activateOptOut(ctx, manager, {
      organizationId,
      messagingChannelId: data.messagingChannelId,
      phone,
      source: "keyword",
      keyword,
      reason: null,
    });
    return { optOutId: record.id, keyword };
  });
}
