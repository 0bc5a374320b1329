import { MESSAGING_RPC } from "@platform/contracts";
import type { MessagingContext } from "../../context";
import { sendTemplates } from "../../use-cases/send-templates";

/** `rpc.messaging.template.send.v1`: a batch of one template job's sends on one channel (asked by template-jobs). */
export function serveTemplateSend(ctx: MessagingContext): void {
  ctx.bus.serve(MESSAGING_RPC.sendTemplates, (req) => sendTemplates(ctx, req));
}
