import { domainEvent, enqueue } from "@platform/bus";
import type { OptOutLookup, OptOutState } from "@platform/contracts";
import { iso } from "@platform/db";
import type { EntityManager } from "typeorm";
import type { OptOutSource } from "../db/entities/opt-out.entity";
import type { OptOutKey, OptOutRecord } from "../db/repositories/opt-outs.repository";
import { SCHEMA, type ContactsContext } from "./context";
import { requireChannel } from "./require-channel";

export const toOptOutState = (record: OptOutRecord | null): OptOutState =>
  record
    ? { active: record.active, optOutId: record.id, revokedAt: record.active ? null : iso(record.revokedAt) }
    : { active: false, optOutId: null, revokedAt: null };

export interface ActivateOptOut extends OptOutKey {
  source: OptOutSource;
  /** The matched keyword (keyword source only). */
  keyword?: string;
  reason?: string | null;
}

/**
 * Moves (channel, phone) into the active state inside the caller's
 * transaction. Only the transition into active emits `optout.created`
 * (through the outbox, committed with the state); a set on an active
 * opt-out changes nothing and emits nothing.
 */
export async function activateOptOut(ctx: ContactsContext, manager: EntityManager, req: ActivateOptOut): Promise<OptOutRecord> {
  const reason = req.reason ?? null;
  const { record, activated } = await ctx.optOuts.activate(manager, req, {
    source: req.source,
    keyword: req.keyword ?? null,
    reason,
  });
  if (activated) {
    const contactId = await ctx.contacts.findIdByPhone(manager, req.organizationId, req.phone);
    await enqueue(manager, SCHEMA, [
      domainEvent("optout.created", req.organizationId, {
        optOutId: record.id,
        messagingChannelId: req.messagingChannelId,
        phone: req.phone,
        contactId,
        source: req.source,
        ...(req.source === "keyword" && req.keyword !== undefined ? { keyword: req.keyword } : {}),
        reason,
      }),
    ]);
    ctx.log.info({ organizationId: req.organizationId, optOutId: record.id, messagingChannelId: req.messagingChannelId, source: req.source }, "opt-out activated");
  }
  return record;
}

/** `set` (API or manual addition in the application): checks the channel, then activates. */
export async function setOptOut(ctx: ContactsContext, req: ActivateOptOut): Promise<OptOutState> {
  await requireChannel(ctx, req.organizationId, req.messagingChannelId);
  const record = await ctx.db.transaction((manager) => activateOptOut(ctx, manager, req));
  return toOptOutState(record);
}

/** `clear`: revokes an active opt-out; idempotent, and safe on a number never opted out. */
export async function clearOptOut(ctx: ContactsContext, key: OptOutKey): Promise<OptOutState> {
  await requireChannel(ctx, key.organizationId, key.messagingChannelId);
  const record = await ctx.db.transaction((manager) => ctx.optOuts.revoke(manager, key));
  return toOptOutState(record);
}

/**
 * The send-time check (single messages and each recipient of a template
 * job): which of `phones` have an active opt-out on the channel. Read from
 * the committed table on every call (no cache), so a `set` that has answered
 * is enforced from then on.
 */
export async function checkOptOuts(
  ctx: ContactsContext,
  req: { organizationId: string; messagingChannelId: string; phones: string[] },
): Promise<{ optedOut: string[] }> {
  const phones = [...new Set(req.phones)];
  return { optedOut: await ctx.optOuts.activeAmong(req.organizationId, req.messagingChannelId, phones) };
}

/** The console's look-up: the phone's record on every channel of the organization (active or revoked). */
export async function lookUpOptOuts(ctx: ContactsContext, organizationId: string, phone: string): Promise<OptOutLookup> {
  const rows = await ctx.optOuts.byPhone(organizationId, phone);
  return {
    phone,
    items: rows.map((r) => ({
      optOutId: r.id,
      messagingChannelId: r.messaging_channel_id,
      phone: r.phone,
      active: r.active,
      source: r.source,
      keyword: r.keyword,
      reason: r.reason,
      createdAt: iso(r.created_at)!,
      updatedAt: iso(r.updated_at)!,
      revokedAt: iso(r.revoked_at),
    })),
  };
}
