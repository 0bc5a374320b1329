import { enqueue, PermanentError, type OutboxMessage } from "@platform/bus";
import {
  normalizePhone,
  ProviderMessagesValue,
  ProviderWebhookBody,
  type ProviderInboundMessage,
  type ProviderStatus,
} from "@platform/contracts";
import { newId } from "@platform/id";
import type { MessagingContext } from "../context";
import { channelsRepository, type ChannelRow } from "../db/repositories/channels.repository";
import { conversationsRepository } from "../db/repositories/conversations.repository";
import { messagesRepository, type MessageRow } from "../db/repositories/messages.repository";
import { serviceWindowsRepository } from "../db/repositories/service-windows.repository";
import type { MessageStatus } from "../db/entities/message.entity";
import { resolveContact } from "./contacts";
import { conversationEvent, messageReceivedEvent, messageStatusEvent, type OutboundEventStatus } from "./events";

/**
 * One provider webhook batch, as the gateway stored it (raw body, signature
 * already checked). `messages` changes carry inbound messages and statuses;
 * template status changes belong to template-jobs and are skipped here.
 * Everything is idempotent: a redelivered batch changes nothing twice.
 */
export async function processProviderBatch(ctx: MessagingContext, rawBody: string): Promise<void> {
  let json: unknown;
  try {
    json = parseProviderJson(rawBody);
  } catch {
    throw new PermanentError("provider batch is not JSON");
  }
  const body = ProviderWebhookBody.safeParse(json);
  if (!body.success) throw new PermanentError(`provider batch has an unexpected shape: ${body.error.message.slice(0, 200)}`);

  for (const entry of body.data.entry) {
    for (const change of entry.changes) {
      if (change.field !== "messages") continue;
      const value = ProviderMessagesValue.safeParse(change.value);
      if (!value.success) {
        ctx.log.warn({ err: value.error.message.slice(0, 300) }, "provider messages change ignored: unexpected shape");
        continue;
      }
      const channel = await channelsRepository.findByProviderPhoneNumberId(ctx.db, value.data.metadata.phone_number_id);
      if (!channel) {
        ctx.log.warn({ phoneNumberId: value.data.metadata.phone_number_id }, "provider batch for an unknown phone number id ignored");
        continue;
      }
      if (value.data.messages?.length) await receiveMessages(ctx, channel, value.data);
      if (value.data.statuses?.length) await applyStatuses(ctx, channel, value.data.statuses);
    }
  }
}

/** U+FFFD, the Unicode replacement character. */
const REPLACEMENT = "\uFFFD";

/**
 * The batch's JSON, with any NUL character in its strings replaced by U+FFFD:
 * the network may carry NUL in a text, a name or a payload, Postgres can
 * store none, and a message that can never be stored would otherwise be
 * redelivered until it reached the dead-letter stream. (Raw NUL bytes are not
 * valid JSON; only the escape `\u0000` can carry one.)
 */
export function parseProviderJson(rawBody: string): unknown {
  if (!rawBody.includes("\\u0000")) return JSON.parse(rawBody);
  return JSON.parse(rawBody, (_key, value: unknown) => (typeof value === "string" && value.includes("\0") ? value.replaceAll("\0", REPLACEMENT) : value));
}

function providerTime(ts: string | number | undefined): Date {
  const seconds = Number(ts);
  return Number.isFinite(seconds) && seconds > 0 ? new Date(seconds * 1000) : new Date();
}

async function receiveMessages(ctx: MessagingContext, channel: ChannelRow, value: ProviderMessagesValue): Promise<void> {
  const incoming = (value.messages ?? []).flatMap((m) => {
    const phone = normalizePhone(m.from);
    if (!phone) {
      ctx.log.warn({ providerMessageId: m.id }, "inbound message with an unreadable sender ignored");
      return [];
    }
    return [{ m, phone }];
  });
  if (incoming.length === 0) return;
  // Provider retries: skip what we already stored before asking contacts anything.
  const known = await messagesRepository.knownInboundIds(ctx.db, incoming.map((i) => i.m.id));
  const fresh = incoming.filter((i) => !known.has(i.m.id));
  if (fresh.length === 0) return;

  const profiles = new Map((value.contacts ?? []).map((c) => [c.wa_id, c.profile?.name]));
  const contactIds = new Map<string, string>();
  await Promise.all(
    [...new Map(fresh.map((i) => [i.phone, i.m])).entries()].map(async ([phone, m]) => {
      const name = profiles.get(m.from) ?? (value.contacts?.length === 1 ? value.contacts[0].profile?.name : undefined);
      const contactId = await resolveContact(ctx.bus, {
        organizationId: channel.organization_id,
        phone,
        waId: m.from.replace(/[^\d]/g, ""),
        ...(name ? { name } : {}),
      });
      contactIds.set(phone, contactId);
    }),
  );

  await ctx.db.transaction(async (tx) => {
    const events: OutboxMessage[] = [];
    for (const { m, phone } of fresh) {
      // Two replicas handling the same provider message serialize here; the second finds it stored.
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('messaging.inbound:' || $1))`, [m.id]);
      if ((await messagesRepository.knownInboundIds(tx, [m.id])).size > 0) continue;
      const contactId = contactIds.get(phone)!;
      const { conversation, opened } = await conversationsRepository.openOrTouch(tx, {
        organizationId: channel.organization_id,
        channelId: channel.id,
        contactId,
        phone,
      });
      const at = providerTime(m.timestamp);
      const stored = await messagesRepository.insertInbound(tx, {
        id: newId("message"),
        organizationId: channel.organization_id,
        channelId: channel.id,
        conversationId: conversation.id,
        contactId,
        phone,
        type: m.type,
        ...content(m),
        providerMessageId: m.id,
        providerTimestamp: at,
      });
      if (!stored) continue;
      await serviceWindowsRepository.recordInbound(tx, channel.id, phone, at);
      if (opened) events.push(conversationEvent(conversation, "conversation.opened"));
      events.push(messageReceivedEvent(stored));
    }
    await enqueue(tx, "messaging", events);
  });
}

function content(m: ProviderInboundMessage): { text: string | null; buttonText: string | null; buttonPayload: string | null } {
  if (m.type === "button" && m.button) return { text: null, buttonText: m.button.text, buttonPayload: m.button.payload };
  return { text: m.type === "text" && m.text ? m.text.body : null, buttonText: null, buttonPayload: null };
}

const RANK: Record<string, number> = { pending: 0, sent: 1, delivered: 2, read: 3 };
const FINAL = new Set<MessageStatus>(["read", "failed"]);

/**
 * Forward-only status machine: `sent` < `delivered` < `read`; `failed` from
 * any non-final state; `read` and `failed` are final. Each transition is
 * emitted once. A message still `pending` (its send answer not stored yet)
 * that jumps ahead also gets its `message.sent`, since the provider has it.
 */
async function applyStatuses(ctx: MessagingContext, channel: ChannelRow, statuses: ProviderStatus[]): Promise<void> {
  const ourIds = statuses.map((s) => s.biz_opaque_callback_data).filter((x): x is string => typeof x === "string" && x.length > 0);
  const providerIds = statuses.map((s) => s.id);
  await ctx.db.transaction(async (tx) => {
    const rows = await messagesRepository.lockForStatuses(tx, channel.id, ourIds, providerIds);
    if (rows.length === 0) return;
    const byId = new Map(rows.map((r) => [r.id, r]));
    const byProviderId = new Map(rows.filter((r) => r.provider_message_id).map((r) => [r.provider_message_id!, r]));
    const touched = new Map<string, MessageRow>();
    const events: OutboxMessage[] = [];

    for (const s of statuses) {
      const row = (s.biz_opaque_callback_data ? byId.get(s.biz_opaque_callback_data) : undefined) ?? byProviderId.get(s.id);
      if (!row) continue;
      const target = s.status as MessageStatus;
      if (FINAL.has(row.status) || (target !== "failed" && !(target in RANK))) continue;
      if (target !== "failed" && RANK[target] <= RANK[row.status]) continue;

      const before = row.status;
      if (!row.provider_message_id) row.provider_message_id = s.id;
      if (before === "pending" && target !== "sent") {
        row.status = "sent";
        events.push(messageStatusEvent({ ...row }, "sent"));
      }
      row.status = target;
      if (target === "failed") {
        const e = s.errors?.[0];
        row.error_code = e ? String(e.code) : "unknown";
        row.error_title = e?.title ?? e?.message ?? "Message failed";
      }
      events.push(messageStatusEvent({ ...row }, target as OutboundEventStatus));
      touched.set(row.id, row);
    }

    await messagesRepository.applyStatuses(
      tx,
      [...touched.values()].map((r) => ({
        id: r.id,
        status: r.status,
        providerMessageId: r.provider_message_id,
        errorCode: r.status === "failed" ? r.error_code : null,
        errorTitle: r.status === "failed" ? r.error_title : null,
      })),
    );
    await enqueue(tx, "messaging", events);
  });
}
