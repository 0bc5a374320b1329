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
