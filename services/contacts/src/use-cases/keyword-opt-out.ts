import { DEFAULT_OPT_OUT_KEYWORDS, normalizePhone, type InboundForKeywords } from "@platform/contracts";
import { PermanentError } from "@platform/bus";
import type { ContactsContext } from "./context";
import { activateOptOut } from "./opt-outs";

/**
 * Case-insensitive across scripts, and nothing more: both sides in lower case
 * (`STRAẞE` and `straße` meet, `ΣΤΟΠ` and `στοπ` too). Not upper case, which
 * maps other letters onto a keyword's (dotless `quıt` onto `QUIT`, long-s
 * `ſtop` and the ligature `ﬆop` onto `STOP`): those are other spellings.
 * Composed and decomposed accents are one spelling.
 */
const fold = (s: string) => s.trim().normalize("NFC").toLowerCase();

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
  return ctx.keywords.get(organizationId, async () => {
    const org = await ctx.organizations.findById(organizationId);
    return org ? org.optOutKeywords : DEFAULT_OPT_OUT_KEYWORDS;
  });
}

/**
 * The keyword lists read by the keyword consumer, kept in memory for `ttlMs`
 * (every inbound message needs its organization's list; reading the copy per
 * message was one query per `message.received`). This process's own
 * `sys.organization.upserted` handler evicts the organization after its write
 * commits, so a change it applies counts from the next message on; a change
 * applied by another replica counts within `ttlMs` (the copy itself arrives
 * asynchronously anyway). Concurrent misses share one read, and an eviction
 * beats the reads in flight (`generation`): a read that started before the
 * eviction answers its own callers but is not stored.
 */
export class KeywordCache {
  private readonly entries = new Map<string, { value: readonly string[]; expiresAt: number }>();
  private readonly loading = new Map<string, { generation: number; promise: Promise<readonly string[]> }>();
  private generation = 0;

  constructor(private readonly ttlMs: number, private readonly maxEntries = 10_000) {}

  async get(organizationId: string, load: () => Promise<readonly string[]>): Promise<readonly string[]> {
    const hit = this.entries.get(organizationId);
    if (hit && hit.expiresAt > Date.now()) return hit.value;
    const pending = this.loading.get(organizationId);
    if (pending && pending.generation === this.generation) return pending.promise;
    const generation = this.generation;
    const promise = load().then(
      (value) => {
        if (this.loading.get(organizationId)?.promise === promise) this.loading.delete(organizationId);
        if (generation === this.generation && this.ttlMs > 0) {
          if (this.entries.size >= this.maxEntries) this.entries.clear();
          this.entries.set(organizationId, { value, expiresAt: Date.now() + this.ttlMs });
        }
        return value;
      },
      (err: unknown) => {
        if (this.loading.get(organizationId)?.promise === promise) this.loading.delete(organizationId);
        throw err;
      },
    );
    this.loading.set(organizationId, { generation, promise });
    return promise;
  }

  evict(organizationId: string): void {
    this.generation++;
    this.entries.delete(organizationId);
    this.loading.delete(organizationId);
  }
}

/**
 * The keyword opt-outs of an inbound batch (ADR 0014), asked by messaging with the batch's contacts: a text that is
 * exactly one of the organization's keywords opts its sender out of the channel it arrived on. Button replies never do
 * (they go to the integrator's own handling). A message is acted upon once (its key, the provider's message id, is
 * claimed in the same transaction), so a redelivered message changes nothing, even after a later clear.
 * Returns the opt-outs made.
 */
export async function applyKeywordOptOuts(
  ctx: ContactsContext,
  organizationId: string,
  inbound: readonly InboundForKeywords[],
): Promise<Array<{ optOutId: string; keyword: string }>> {
  const texts = inbound.filter((m) => m.type === "text" && typeof m.text === "string");
  if (texts.length === 0) return [];
  const keywords = await keywordsOf(ctx, organizationId);
  const made: Array<{ optOutId: string; keyword: string }> = [];
  for (const m of texts) {
    const keyword = matchOptOutKeyword(m.text!, keywords);
    if (!keyword) continue;
    const phone = normalizePhone(m.phone);
    if (!phone) throw new PermanentError(`message ${m.key}: phone is not E.164`);
    const record = await ctx.db.transaction(async (manager) => {
      if (!(await ctx.keywordMessages.claim(manager, organizationId, m.key))) return null;
      return activateOptOut(ctx, manager, { organizationId, messagingChannelId: m.messagingChannelId, phone, source: "keyword", keyword, reason: null });
    });
    if (record) made.push({ optOutId: record.id, keyword });
  }
  return made;
}
