import { enqueue, type OutboxMessage } from "@platform/bus";
import { MESSAGING_SUBJECTS, normalizePhone, SUBJECTS, type Channel } from "@platform/contracts";
import { sqlState, UNIQUE_VIOLATION } from "@platform/db";
import { ApiError, type CursorCodec } from "@platform/http";
import { newId } from "@platform/id";
import type { z } from "zod";
import type { CreateChannelRequest, PageQuery, UpdateChannelRequest } from "@platform/contracts";
import type { MessagingContext } from "../context";
import { channelsRepository, toChannel, type ChannelRow } from "../db/repositories/channels.repository";

/** `sys.channel.upserted.v1`: how other services learn about channels (they never read our tables). */
export function channelUpserted(row: ChannelRow): OutboxMessage {
  const channel = toChannel(row);
  return {
    subject: SUBJECTS.channelUpserted.subject,
    msgId: `channel:${row.id}:${row.updated_at.getTime()}`,
    payload: { ...channel, organizationId: row.organization_id },
  };
}

/** After a committed channel change: this replica's send cache at once, the others by broadcast. */
function channelsChanged(ctx: MessagingContext, organizationId: string): void {
  ctx.lookups.forgetOrganization(organizationId);
  try {
    ctx.bus.broadcast(MESSAGING_SUBJECTS.channelsChanged, { organizationId });
  } catch (err) {
    // The other replicas' entries expire within seconds anyway.
    ctx.log.warn({ organizationId, err: (err as Error).message }, "channel change broadcast failed");
  }
}

function conflictOr(err: unknown): never {
  if (sqlState(err) === UNIQUE_VIOLATION) throw new ApiError("CONFLICT", "providerPhoneNumberId is already used by another channel");
  throw err;
}

/**
 * Creates a channel. The organization's first channel, or one created with
 * `isDefault: true`, becomes its default (the previous default loses the flag).
 */
export async function createChannel(ctx: MessagingContext, organizationId: string, input: z.infer<typeof CreateChannelRequest>): Promise<Channel> {
  const phone = normalizePhone(input.phoneNumber);
  if (!phone) throw ApiError.validation([{ path: "phoneNumber", message: "is not a valid phone number" }]);
  try {
    const channel = await ctx.db.transaction(async (tx) => {
      await channelsRepository.lockOrganization(tx, organizationId);
      const first = (await channelsRepository.countInOrganization(tx, organizationId)) === 0;
      const isDefault = first || input.isDefault === true;
      const id = newId("channel");
      const changed = isDefault ? await channelsRepository.clearDefault(tx, organizationId, id) : [];
      const row = await channelsRepository.insert(tx, {
        id,
        organization_id: organizationId,
        name: input.name,
        phone_number: phone,
        provider_phone_number_id: input.providerPhoneNumberId,
        connected: input.connected,
        is_default: isDefault,
        messages_per_second: input.messagesPerSecond,
      });
      await enqueue(tx, "messaging", [...changed.map(channelUpserted), channelUpserted(row)]);
      return toChannel(row);
    });
    channelsChanged(ctx, organizationId);
    return channel;
  } catch (err) {
    conflictOr(err);
  }
}

export async function updateChannel(
  ctx: MessagingContext,
  organizationId: string,
  channelId: string,
  patch: z.infer<typeof UpdateChannelRequest>,
): Promise<Channel> {
  const channel = await ctx.db.transaction(async (tx) => {
    await channelsRepository.lockOrganization(tx, organizationId);
    const existing = await channelsRepository.findById(tx, organizationId, channelId);
    if (!existing) throw new ApiError("CHANNEL_NOT_FOUND", "Messaging channel not found");
    const changed = patch.isDefault === true ? await channelsRepository.clearDefault(tx, organizationId, channelId) : [];
    // The default is the one marked, else the first created (contract): unmarked, it moves to the first channel
    // created among the others (once this one has lost it: one default at most, by index), so the list always names
    // the channel a send without `messagingChannelId` uses. An organization's only channel stays its default.
    const unmarking = patch.isDefault === false && existing.is_default;
    const successor = unmarking ? await channelsRepository.firstOtherId(tx, organizationId, channelId) : undefined;
    const isDefault = unmarking && !successor ? undefined : patch.isDefault;
    const row = (await channelsRepository.update(tx, organizationId, channelId, { ...patch, isDefault }))!;
    if (successor) changed.push(await channelsRepository.markDefault(tx, organizationId, successor));
    await enqueue(tx, "messaging", [...changed.map(channelUpserted), channelUpserted(row)]);
    return toChannel(row);
  });
  channelsChanged(ctx, organizationId);
  return channel;
}

/** Position after a channel; `o` is the organization it was issued to. */
export interface ChannelCursor {
  o: string;
  id: string;
}
const isChannelCursor = (p: unknown): p is ChannelCursor =>
  typeof p === "object" && p !== null && typeof (p as ChannelCursor).o === "string" && typeof (p as ChannelCursor).id === "string";

/** The Settings screen's list: creation order, the same cursor pagination as `/api/v1`. */
export async function listChannels(
  ctx: MessagingContext,
  cursors: CursorCodec<ChannelCursor>,
  organizationId: string,
  query: PageQuery,
): Promise<{ items: Channel[]; nextCursor?: string }> {
  const after =
    query.cursor !== undefined ? cursors.decode(query.cursor, (p): p is ChannelCursor => isChannelCursor(p) && p.o === organizationId).id : undefined;
  const rows = await channelsRepository.page(ctx.db, organizationId, query.limit + 1, after);
  const items = rows.slice(0, query.limit).map(toChannel);
  if (rows.length <= query.limit) return { items };
  return { items, nextCursor: cursors.encode({ o: organizationId, id: items[items.length - 1].id }) };
}

/** RPC.lookupChannel: a channel of the organization, or null. */
export async function lookupChannel(ctx: MessagingContext, organizationId: string, channelId: string) {
  const row = await channelsRepository.findById(ctx.db, organizationId, channelId);
  return { channel: row ? { ...toChannel(row), organizationId: row.organization_id } : null };
}
