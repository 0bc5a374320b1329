import { BusUnavailableError, RpcCallError } from "@platform/bus";
import { RPC } from "@platform/contracts";
import { z } from "zod";
import { ApiError } from "@platform/http";
import type { ContactsContext } from "./context";

/**
 * Checks that a channel exists and belongs to the organization, else 404
 * CHANNEL_NOT_FOUND (another organization's channel is not found, never
 * forbidden). Channels belong to messaging: the local copy comes from
 * sys.channel.upserted; a channel not copied yet (just created) is asked of
 * messaging and stored. When messaging cannot answer: 503, never a guess.
 */
export async function requireChannel(ctx: ContactsContext, organizationId: string, channelId: string): Promise<void> {
  let owner = (await ctx.channels.findById(channelId))?.organizationId;
  if (owner === undefined) {
    let answer;
    try {
      answer = await ctx.bus.request(RPC.lookupChannel, { organizationId, channelId }, { timeoutMs: ctx.env.CHANNEL_LOOKUP_TIMEOUT_MS });
    } catch (err) {
      // A malformed answer is as unusable as none.
      if (err instanceof BusUnavailableError || err instanceof RpcCallError || err instanceof z.ZodError) {
        ctx.log.warn({ organizationId, channelId, err: err.message }, "channel lookup failed");
        throw ApiError.unavailable();
      }
      throw err;
    }
    if (answer.channel) {
      await ctx.channels.upsert(answer.channel);
      if (answer.channel.id === channelId) owner = answer.channel.organizationId;
    }
  }
  if (owner !== organizationId) throw new ApiError("CHANNEL_NOT_FOUND", "Channel not found");
}
