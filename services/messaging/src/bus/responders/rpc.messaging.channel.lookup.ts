import { RPC } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { lookupChannel } from "../../use-cases/channels";

/** `rpc.messaging.channel.lookup.v1`: a channel of an organization, or null. */
export function serveChannelLookup(ctx: MessagingContext): void {
  ctx.bus.serve(RPC.lookupChannel, (req) => lookupChannel(ctx, req.organizationId, req.channelId));
}
