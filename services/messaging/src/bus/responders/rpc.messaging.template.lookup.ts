import { MESSAGING_RPC } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { lookupTemplateSends } from "../../use-cases/send-templates";

/** `rpc.messaging.template.lookup.v1`: the stored outcome of template sends by key, sending nothing (asked by template-jobs). */
export function serveTemplateLookup(ctx: MessagingContext): void {
  ctx.bus.serve(MESSAGING_RPC.lookupTemplateSends, (req) => lookupTemplateSends(ctx, req));
}
