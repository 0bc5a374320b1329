import { enqueue, outboxOrigin, PermanentError, type OutboxMessage, type OutboxOrigin } from "@platform/bus";
import {
  KEYWORD_CANDIDATE_MAX_LENGTH,
  normalizePhone,
  parseProviderJson,
  PROVIDER_MESSAGE_ID_MAX_LENGTH,
  ProviderContact,
  ProviderInboundMessage,
  ProviderMessagesChangeValue,
  ProviderStatus,
  ProviderWebhookChange,
  ProviderWebhookEntries,
  ProviderWebhookEntry,
  type InboundExtras,
  type ProviderMessagesValue,
} from "@platform/contracts";
import { bulkTransaction } from "@platform/db";
import { newId } from "@platform/id";
import { ArrivalLinger, Batcher } from "@platform/runtime";
import { z } from "zod";
import type { MessagingContext } from "../context";
import type { ChannelRow } from "../db/repositories/channels.repository";
import { conversationsRepository } from "../db/repositories/conversations.repository";
import { messagesRepository, type InboundInsert, type MessageRow } from "../db/repositories/messages.repository";
import type { MessageStatus } from "../db/entities/message.entity";
import { resolveContacts } from "./contacts";
import { conversationEvent, messageReceivedEvent, messageStatusEvent, type OutboundEventStatus } from "./events";

/**
 * One provider webhook batch, as the gateway stored it (raw body, signature
 * already checked). `messages` changes carry inbound messages and statuses;
 * template status changes belong to template-jobs and are skipped here.
 * Everything is idempotent: a redelivered batch changes nothing twice.
 *
 * `receivedAt` is when the gateway received the batch (ISO 8601; now when
 * absent or unreadable): the receipt time of a message whose own timestamp
 * cannot be right (`receiptTime`).
 *
 * Read item by item (`readMessagesValues`): the gateway answered the provider
 * 200 before this runs, so the provider will not send the batch again; an item
 * that cannot be read is skipped alone (counted in one warning per batch) and
 * the items beside it are handled. Only a body that is not JSON or
 * has no `entry` list at all is refused (dead-letter stream): nothing in it is
 * readable.
 */
export async function processProviderBatch(ctx: MessagingContext, rawBody: string, receivedAt?: string): Promise<void> {
  const receivedAtMs = receivedAt !== undefined ? Date.parse(receivedAt) : NaN;
  const received = new Date(Number.isFinite(receivedAtMs) ? receivedAtMs : Date.now());
  let json: unknown;
  try {
    json = parseProviderJson(rawBody);
  } catch {
    throw new PermanentError("provider batch is not JSON");
  }
  const body = ProviderWebhookEntries.safeParse(json);
  if (!body.success) throw new PermanentError(`provider batch has an unexpected shape: ${body.error.message.slice(0, 200)}`);

  const { values, skipped, firstIssue } = readMessagesValues(body.data.entry);
  if (Object.values(skipped).some((n) => n > 0)) {
    ctx.log.warn({ skipped, firstIssue }, "provider batch items skipped: unexpected shape");
  }
  // Status callbacks of one phone number reach the group commit in the order the bus handed their batches over
  // (turns taken now, before anything is awaited): the provider's `delivered` then `read` of a message must not be
  // overtaken by one another because one batch's channel look-up took longer (the `read` would make the `delivered`
  // a late status, its event lost).
  const turns = values.map((v) => (v.statuses?.length ? groupOf(ctx).statusTurns.take(v.metadata.phone_number_id) : undefined));
  try {
    for (const [i, value] of values.entries()) {
      const channel = await ctx.lookups.forProviderNumber(value.metadata.phone_number_id);
      const turn = turns[i];
      if (!channel) {
        turn?.release();
        ctx.log.warn({ phoneNumberId: value.metadata.phone_number_id }, "provider batch for an unknown phone number id ignored");
        continue;
      }
      // The next turn may go as soon as these statuses are in the group commit's queue, not after their commit.
      const statuses = turn
        ? turn.ready.then(() => {
            try {
              return submitStatuses(ctx, channel, value.statuses!);
            } finally {
              turn.release();
            }
          })
        : undefined;
      // Both awaited, and both handled from the start (a failed status write is no unhandled rejection while the
      // messages are still being stored); the first failure fails the batch, which is redelivered.
      const outcomes = await Promise.allSettled([value.messages?.length ? receiveMessages(ctx, channel, value, received) : undefined, statuses]);
      for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
    }
  } finally {
    for (const turn of turns) turn?.release();
  }
}

/** Items of a batch skipped because they cannot be read, by kind. */
export type SkippedItems = { entries: number; changes: number; contacts: number; messages: number; statuses: number };

/**
 * The batch's `messages` changes, each item read on its own: an entry, a
 * change, a contact, a message or a status that does not have the shape
 * messaging needs is left out and counted, the rest kept. A list that is not a
 * list counts as one skipped item. Changes of other fields (template status
 * updates) are not messaging's and are not counted.
 */
export function readMessagesValues(entries: unknown[]): { values: ProviderMessagesValue[]; skipped: SkippedItems; firstIssue?: string } {
  const skipped: SkippedItems = { entries: 0, changes: 0, contacts: 0, messages: 0, statuses: 0 };
  let firstIssue: string | undefined;
  const read = <T>(kind: keyof SkippedItems, schema: z.ZodType<T>, item: unknown): T | undefined => {
    const parsed = schema.safeParse(item);
    if (parsed.success) return parsed.data;
    skipped[kind]++;
    firstIssue ??= `${kind}: ${parsed.error.message.slice(0, 300)}`;
    return undefined;
  };
  const list = <T>(kind: "contacts" | "messages" | "statuses", schema: z.ZodType<T>, items: unknown): T[] | undefined => {
    if (items === undefined || items === null) return undefined;
    if (!Array.isArray(items)) {
      skipped[kind]++;
      firstIssue ??= `${kind}: not a list`;
      return undefined;
    }
    return items.flatMap((item) => {
      const parsed = read(kind, schema, item);
      return parsed === undefined ? [] : [parsed];
    });
  };

  const values: ProviderMessagesValue[] = [];
  for (const rawEntry of entries) {
    const entry = read("entries", ProviderWebhookEntry, rawEntry);
    for (const rawChange of entry?.changes ?? []) {
      const change = read("changes", ProviderWebhookChange, rawChange);
      if (!change || change.field !== "messages") continue;
      const value = read("changes", ProviderMessagesChangeValue, change.value);
      if (!value) continue;
      values.push({
        ...value,
        contacts: list("contacts", ProviderContact, value.contacts),
        messages: list("messages", ProviderInboundMessage, value.messages),
        statuses: list("statuses", ProviderStatus, value.statuses),
      });
    }
  }
  return { values, skipped, firstIssue };
}

/**
 * Turns per key, in the order they were taken: a turn is `ready` once every
 * turn taken before it for that key was released. Releasing twice is harmless.
 */
export class Turns {
  private readonly tails = new Map<string, Promise<void>>();

  take(key: string): { ready: Promise<void>; release: () => void } {
    const ready = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const tail = ready.then(() => released);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return { ready, release };
  }

  /** Keys with turns not yet released (for tests). */
  get size(): number {
    return this.tails.size;
  }
}

/**
 * Clock skew allowed between the provider and us: a message's timestamp up to this far past the batch's receipt is
 * taken as it is.
 */
export const PROVIDER_CLOCK_SKEW_MS = 5 * 60_000;

/**
 * When a message was received: the provider's timestamp (Unix seconds), or the time the batch was received when that
 * timestamp is missing, not a number, or later than the batch's receipt plus the clock skew. A message cannot have
 * been sent after the batch that carries it arrived: such a timestamp is in milliseconds (`1795000000000` would be
 * the year 58875) or plainly wrong, and taken as it is it would become an absurd `receivedAt` in `message.received`
 * and keep the contact's 24-hour service window (moved to the latest inbound message) open indefinitely.
 */
export function receiptTime(ts: string | number | undefined, received: Date): Date {
  const seconds = Number(ts);
  if (!Number.isFinite(seconds) || seconds <= 0) return received;
  const at = seconds * 1000;
  return at > received.getTime() + PROVIDER_CLOCK_SKEW_MS ? received : new Date(at);
}

async function receiveMessages(ctx: MessagingContext, channel: ChannelRow, value: ProviderMessagesValue, received: Date): Promise<void> {
  const incoming = (value.messages ?? []).flatMap((m) => {
    // One message that can never be stored must not hold back the rest of its batch (the whole batch would be
    // redelivered until it reached the dead-letter stream, its good messages never stored).
    if (m.id.length > PROVIDER_MESSAGE_ID_MAX_LENGTH) {
      ctx.log.warn({ providerMessageId: `${m.id.slice(0, 80)}…`, length: m.id.length }, "inbound message with an over-long provider id ignored");
      return [];
    }
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

  // The batch's contacts in one request (created when new, name and waId kept), not one per sender.
  const profiles = new Map((value.contacts ?? []).map((c) => [c.wa_id, c.profile?.name]));
  const senders = [...new Map(fresh.map((i) => [i.phone, i.m])).entries()];
  const contactIds = await resolveContacts(ctx.bus, {
    organizationId: channel.organization_id,
    phones: senders.map(([phone]) => phone),
    names: senders.map(([, m]) => profiles.get(m.from) ?? (value.contacts?.length === 1 ? value.contacts[0].profile?.name : undefined) ?? null),
    waIds: senders.map(([, m]) => m.from.replace(/[^\d]/g, "")),
    // Contacts applies keyword opt-outs before answering (ADR 0014): only a text can be one, and only a short one.
    inbound: fresh.flatMap(({ m, phone }) => {
      const text = m.type === "text" ? m.text?.body.trim() : undefined;
      if (!text || text.length > KEYWORD_CANDIDATE_MAX_LENGTH) return [];
      return [{ key: m.id, messagingChannelId: channel.id, phone, type: m.type, text }];
    }),
  });

  // Each batch's events carry its own request id and trace, though written together with other batches' (group commit).
  const origin = outboxOrigin();
  await groupOf(ctx).inbound.submit(channel.id, { channel, items: fresh.map(({ m, phone }) => ({ m, phone, contactId: contactIds.get(phone)!, origin, at: receiptTime(m.timestamp, received) })) }).then(settle);
}

/** `at`: the message's receipt time (`receiptTime`), for `receivedAt` and the service window. */
type InboundItem = { m: ProviderInboundMessage; phone: string; contactId: string; origin: OutboxOrigin; at: Date };
type StatusInput = { ourId: string | null; providerMessageId: string; status: string; errorCode: string | null; errorTitle: string | null; origin: OutboxOrigin };
type Outcome = { ok: true } | { ok: false; err: unknown };
const settle = (o: Outcome): void => {
  if (!o.ok) throw o.err;
};

/**
 * Group commit across concurrently consumed provider batches, per channel
 * (`Batcher`): the batches that arrive while one channel's write is in flight
 * are written together in the next transaction. Each batch's promise settles
 * when its own rows are committed, so the bus acks only what is durable. If a
 * group's transaction fails, each of its batches is tried alone, so one batch
 * that cannot be stored never holds back the others.
 */
/**
 * How long a channel's idle write waits for more batches (ADRs 0010 and 0016): below saturation the provider's batches
 * arrive a few milliseconds apart, and each transaction alone costs its round trips (begin, four statements, commit)
 * and the relay's and the dispatcher's statements after it. About two gaps between the channel's recent batches, 5 to
 * 20 ms, while they stream in; none for a trickle.
 */
const groups = new WeakMap<
  MessagingContext,
  { inbound: Batcher<{ channel: ChannelRow; items: InboundItem[] }, Outcome>; statuses: Batcher<{ channel: ChannelRow; input: StatusInput[] }, Outcome>; statusTurns: Turns }
>();
function groupOf(ctx: MessagingContext) {
  let g = groups.get(ctx);
  if (!g) {
    const grouped =
      <T extends { channel: ChannelRow }>(write: (channel: ChannelRow, units: T[]) => Promise<void>) =>
      async (_channelId: string, units: T[]): Promise<Outcome[]> => {
        try {
          await write(units[0].channel, units);
          return units.map(() => ({ ok: true }));
        } catch (err) {
          if (units.length === 1) return [{ ok: false, err }];
          const alone: Outcome[] = [];
          for (const u of units) alone.push(await write(u.channel, [u]).then((): Outcome => ({ ok: true }), (e: unknown): Outcome => ({ ok: false, err: e })));
          return alone;
        }
      };
    g = {
      inbound: new Batcher(grouped((channel, units: Array<{ channel: ChannelRow; items: InboundItem[] }>) => writeInbound(ctx, channel, units.flatMap((u) => u.items))), 100, 1, new ArrivalLinger()),
      statuses: new Batcher(grouped((channel, units: Array<{ channel: ChannelRow; input: StatusInput[] }>) => writeStatuses(ctx, channel.id, units.flatMap((u) => u.input))), 100, 1, new ArrivalLinger()),
      statusTurns: new Turns(),
    };
    groups.set(ctx, g);
  }
  return g;
}

/**
 * Inbound messages of one channel (one or several provider batches) in one
 * transaction of a fixed number of statements whatever their count: lock the
 * provider ids (two replicas handling the same provider message serialize
 * here; the second finds it stored), skip the stored ones, open or touch each
 * contact's conversation, then store the messages, move the service windows
 * and write the events in one statement.
 */
async function writeInbound(ctx: MessagingContext, channel: ChannelRow, fresh: InboundItem[]): Promise<void> {
  await bulkTransaction(ctx.db, async (tx) => {
    const unique = [...new Map(fresh.map((i) => [i.m.id, i])).values()];
    await messagesRepository.lockInboundIds(tx, unique.map((i) => i.m.id));
    const stored = await messagesRepository.knownInboundIds(tx, unique.map((i) => i.m.id));
    const todo = unique.filter((i) => !stored.has(i.m.id));
    if (todo.length === 0) return;
    const conversations = await conversationsRepository.openOrTouchMany(tx, {
      organizationId: channel.organization_id,
      channelId: channel.id,
      contacts: todo.map(({ phone, contactId }) => ({ contactId, phone })),
    });
    const originOf = new Map<string, OutboxOrigin>();
    const rows: InboundInsert[] = todo.map(({ m, phone, contactId, origin, at }) => {
      originOf.set(m.id, origin);
      return {
        id: newId("message"),
        organizationId: channel.organization_id,
        channelId: channel.id,
        conversationId: conversations.get(contactId)!.conversation.id,
        contactId,
        phone,
        type: m.type,
        ...content(m),
        extras: extrasOf(m),
        providerMessageId: m.id,
        providerTimestamp: at,
      };
    });
    // Events in input order: a conversation's `conversation.opened` before its first `message.received`.
    const events: Array<OutboxMessage & { messageId: string }> = [];
    const announced = new Set<string>();
    for (const r of rows) {
      const c = conversations.get(r.contactId)!;
      if (c.opened && !announced.has(c.conversation.id)) {
        announced.add(c.conversation.id);
        events.push({ ...conversationEvent(c.conversation, "conversation.opened"), ...originOf.get(r.providerMessageId), messageId: r.id });
      }
      events.push({ ...messageReceivedEvent(inboundRow(r), r.extras), ...originOf.get(r.providerMessageId), messageId: r.id });
    }
    await messagesRepository.insertInboundBatch(tx, rows, events);
  });
}

/** The row an inbound insert stores, for its event (the event reads no column the database fills in but `created_at`). */
function inboundRow(r: InboundInsert): MessageRow {
  return {
    id: r.id,
    organization_id: r.organizationId,
    channel_id: r.channelId,
    conversation_id: r.conversationId,
    contact_id: r.contactId,
    phone: r.phone,
    direction: "inbound",
    type: r.type,
    text: r.text,
    button_text: r.buttonText,
    button_payload: r.buttonPayload,
    status: "received" as MessageStatus,
    provider_message_id: r.providerMessageId,
    provider_timestamp: r.providerTimestamp,
    template_job_id: null,
    send_key: null,
    template_payload: null,
    error_code: null,
    error_title: null,
    attempts: 0,
    failures: 0,
    lease_until: null,
    next_attempt_at: null,
    created_at: r.providerTimestamp,
    updated_at: r.providerTimestamp,
  };
}

/**
 * What an inbound message says: its text, or the button reply it is. A quick-reply button (`type: "button"`) and an
 * interactive message's reply button (`interactive.button_reply {id, title}`) are both button replies: `button
 * {text, payload}` in `message.received` (the reply's title and id), never a keyword.
 */
function content(m: ProviderInboundMessage): { text: string | null; buttonText: string | null; buttonPayload: string | null } {
  if (m.type === "button" && m.button) return { text: null, buttonText: m.button.text, buttonPayload: m.button.payload };
  const reply = m.type === "interactive" ? buttonReplyOf((m as { interactive?: unknown }).interactive) : undefined;
  if (reply) return { text: null, buttonText: reply.title, buttonPayload: reply.id };
  return { text: m.type === "text" && m.text ? m.text.body : null, buttonText: null, buttonPayload: null };
}

const MEDIA_TYPES = new Set(["image", "video", "audio", "document", "sticker"]);
const ProviderMedia = z.object({ id: z.string().min(1), mime_type: z.string().optional(), sha256: z.string().optional(), caption: z.string().optional(), filename: z.string().optional() });
const ProviderLocation = z.object({ latitude: z.coerce.number().finite(), longitude: z.coerce.number().finite(), name: z.string().optional(), address: z.string().optional() });
const ProviderListReply = z.object({ id: z.string(), title: z.string(), description: z.string().optional() });
const ProviderReaction = z.object({ message_id: z.string(), emoji: z.string().optional() });

/**
 * What `message.received` carries beyond text and button replies: a media message's id, type and caption (the file
 * itself stays at the provider), a location, an interactive list reply, a reaction. A part the provider sent in a
 * shape we cannot read is left out; the message is still received.
 */
export function extrasOf(m: ProviderInboundMessage): InboundExtras {
  const part = (m as Record<string, unknown>)[m.type];
  if (MEDIA_TYPES.has(m.type)) {
    const media = ProviderMedia.safeParse(part);
    if (!media.success) return {};
    const { id, mime_type: mimeType, sha256, caption, filename: fileName } = media.data;
    return { media: { id, ...(mimeType !== undefined && { mimeType }), ...(sha256 !== undefined && { sha256 }), ...(caption !== undefined && { caption }), ...(fileName !== undefined && { fileName }) } };
  }
  if (m.type === "location") {
    const location = ProviderLocation.safeParse(part);
    return location.success ? { location: location.data } : {};
  }
  if (m.type === "interactive") {
    const list = ProviderListReply.safeParse((part as { list_reply?: unknown } | null | undefined)?.list_reply);
    return list.success ? { listReply: list.data } : {};
  }
  if (m.type === "reaction") {
    const reaction = ProviderReaction.safeParse(part);
    return reaction.success ? { reaction: { providerMessageId: reaction.data.message_id, emoji: reaction.data.emoji ?? "" } } : {};
  }
  return {};
}

function buttonReplyOf(interactive: unknown): { id: string; title: string } | undefined {
  const reply = (interactive as { type?: unknown; button_reply?: { id?: unknown; title?: unknown } } | null | undefined)?.button_reply;
  if (!reply || typeof reply.id !== "string" || typeof reply.title !== "string") return undefined;
  return { id: reply.id, title: reply.title };
}

// `cancelled`: never sent as far as we knew (its job stopped it); a provider callback for it says the provider had
// accepted a call that went unanswered, so it moves on from there as a pending send would.
const RANK: Record<string, number> = { pending: 0, cancelled: 0, sent: 1, delivered: 2, read: 3 };
const FINAL = new Set<MessageStatus>(["read", "failed"]);

/**
 * Forward-only status machine: `sent` < `delivered` < `read`; `failed` from
 * any non-final state; `read` and `failed` are final. Each transition is
 * emitted once. A message still `pending` (its send answer not stored yet)
 * that jumps ahead also gets its `message.sent`, since the provider has it.
 *
 * One transaction: one set-based UPDATE decides every message's new status
 * with these rules in SQL (`applyStatusBatch`), then the events of exactly
 * the changes it made go to the outbox in the same transaction.
 *
 * Hands a batch's statuses to the channel's group commit now (synchronously);
 * the promise settles at their commit.
 */
function submitStatuses(ctx: MessagingContext, channel: ChannelRow, statuses: ProviderStatus[]): Promise<void> {
  const origin = outboxOrigin();
  const input = statuses.map((s) => {
    const e = s.status === "failed" ? s.errors?.[0] : undefined;
    return {
      ourId: s.biz_opaque_callback_data ? s.biz_opaque_callback_data : null,
      providerMessageId: s.id,
      status: s.status,
      errorCode: s.status === "failed" ? (e ? String(e.code) : "unknown") : null,
      errorTitle: s.status === "failed" ? (e?.title ?? e?.message ?? "Message failed") : null,
      origin,
    };
  });
  return groupOf(ctx).statuses.submit(channel.id, { channel, input }).then(settle);
}

/**
 * A provider acceptance that its sender could not record as its own attempt's (`markSent` found the message no longer
 * pending under that attempt: a status callback, a job's cancel or another sender came first): applied as the
 * provider's `sent` status would be, with the same rules. A cancelled message the provider took after all is `sent`
 * with its `message.sent` (its job counts it); one already further on keeps its status and gets the id if it had none.
 */
export async function applyAcceptance(ctx: MessagingContext, channelId: string, messageId: string, providerMessageId: string): Promise<void> {
  await writeStatuses(ctx, channelId, [{ ourId: messageId, providerMessageId, status: "sent", errorCode: null, errorTitle: null, origin: outboxOrigin() }]);
}

/** Statuses of one channel (one or several provider batches, in arrival order) in one transaction: one UPDATE, then the events. */
async function writeStatuses(ctx: MessagingContext, channelId: string, input: StatusInput[]): Promise<void> {
  await bulkTransaction(ctx.db, async (tx) => {
    const changed = await messagesRepository.applyStatusBatch(tx, channelId, input);
    if (changed.length === 0) return;
    // Each status names its message by our id when that is a changed row, else by the provider's id (as the SQL does); in input order.
    const changedIds = new Set(changed.map((c) => c.id));
    const idOfProviderId = new Map(changed.filter((c) => c.provider_message_id).map((c) => [c.provider_message_id!, c.id]));
    const targetsOf = new Map<string, string[]>();
    // A message's events carry the request id and trace of the (first) provider batch that named it.
    const originOf = new Map<string, OutboxOrigin>();
    for (const s of input) {
      const id = s.ourId && changedIds.has(s.ourId) ? s.ourId : idOfProviderId.get(s.providerMessageId);
      if (!id) continue;
      let list = targetsOf.get(id);
      if (!list) targetsOf.set(id, (list = []));
      list.push(s.status);
      if (!originOf.has(id)) originOf.set(id, s.origin);
    }
    const events: OutboxMessage[] = [];
    for (const { old_status: before, ...row } of changed) {
      for (const step of transitions(before, targetsOf.get(row.id) ?? [], row.status)) events.push({ ...messageStatusEvent(row, step), ...originOf.get(row.id) });
    }
    await enqueue(tx, "messaging", events);
  });
}

/**
 * The events of one message's change from `before` to `after` under the
 * batch's statuses (in batch order): the same rules as the SQL, replayed to
 * name each step. A message that jumps ahead gets the steps it implies, in
 * order: `message.sent` first when it was still pending (the provider has
 * it), and `message.delivered` before `message.read` when its `delivered`
 * had not come (a read message was delivered; its own `delivered` callback,
 * should it come later, then emits nothing). So every read message has had
 * its `sent`, `delivered` and `read`, once each and in that order, also when
 * the provider's callbacks reach us out of order (a redelivered batch after a
 * restart, concurrent batches).
 */
export function transitions(before: MessageStatus, targets: string[], after: MessageStatus): OutboundEventStatus[] {
  const steps: OutboundEventStatus[] = [];
  let current = before;
  for (const target of targets) {
    if (FINAL.has(current)) break;
    if (target !== "failed" && !(target in RANK)) continue;
    if (target !== "failed" && RANK[target] <= RANK[current]) continue;
    steps.push(...implied(current, target as MessageStatus), target as OutboundEventStatus);
    current = target as MessageStatus;
  }
  // The database decided; the replay only names the steps. They agree by construction; if ever not, the database's state wins.
  if (current !== after) return [...implied(before, after), after as OutboundEventStatus];
  return steps;
}

/** The events a jump from `from` straight to `to` skips and implies: `sent` out of `pending`, `delivered` before `read`. */
function implied(from: MessageStatus, to: MessageStatus): OutboundEventStatus[] {
  const steps: OutboundEventStatus[] = [];
  if ((from === "pending" || from === "cancelled") && to !== "sent") steps.push("sent");
  if (to === "read" && RANK[from] < RANK.delivered) steps.push("delivered");
  return steps;
}
