import { STREAMS } from "@platform/contracts";
import type { ContactsContext } from "../../use-cases/context";

/**
 * Durables this service no longer reads. `contacts-keyword-opt-outs` read every `message.received` for keyword
 * opt-outs until those moved into the inbound batch's contacts request (ADR 0014); left on the stream, it would keep
 * every later event pending for nobody. Removed at start; gone already is fine.
 */
const RETIRED_DURABLES = ["contacts-keyword-opt-outs"];

export async function retireKeywordConsumer(ctx: ContactsContext): Promise<void> {
  const stream = ctx.bus.streamName(STREAMS.events);
  for (const durable of RETIRED_DURABLES) {
    await ctx.bus.jsm.consumers.delete(stream, durable).catch(() => false);
  }
}
