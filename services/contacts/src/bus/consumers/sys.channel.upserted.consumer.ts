import { STREAMS, SUBJECTS } from "@platform/contracts";
import type { ContactsContext } from "../../use-cases/context";
import { syncChannel } from "../../use-cases/sync-copies";

/** sys.channel.upserted.v1 (messaging) → the local copy of channels, used to check `messagingChannelId`. */
export async function consumeChannelUpserted(ctx: ContactsContext): Promise<void> {
  await ctx.bus.consume({
    stream: STREAMS.system,
    durable: "contacts-channel-upserted",
    subject: SUBJECTS.channelUpserted,
    concurrency: 4,
    handler: (channel) => syncChannel(ctx, channel),
  });
}
