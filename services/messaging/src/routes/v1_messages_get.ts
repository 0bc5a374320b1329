import type { Router } from "express";
import { organizationOf } from "@platform/http";
import type { MessagingContext } from "../context";
import { getMessage } from "../use-cases/get-message";

/** GET /api/v1/messages/:messageId → the stored message, inbound or outbound (what a summarized webhook left out). */
export function v1MessagesGet(router: Router, ctx: MessagingContext): void {
  router.get("/api/v1/messages/:messageId", async (req, res) => {
    res.json(await getMessage(ctx, organizationOf(res), String(req.params.messageId)));
  });
}
