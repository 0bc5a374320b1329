import { MESSAGING_RPC } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { stopTemplateSends } from "../../use-cases/send-templates";

/** `rpc.messaging.template.stop.v1`: a cancelled job's sends still pending here end (asked by template-jobs, ADR 0018). */
export function serveTemplateStop(ctx: MessagingContext): void {
  ctx.bus.serve(MESSAGING_RPC.stopTemplateSends, (req) => stopTemplateSends(ctx, req));
}
