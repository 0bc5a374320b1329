import type { Router } from "express";
import { UpdateChannelRequest } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { MessagingContext } from "../context";
import { updateChannel } from "../use-cases/channels";

/** PATCH /admin/v1/organizations/:orgId/channels/:channelId → channel. */
export function adminChannelsUpdate(router: Router, ctx: MessagingContext): void {
  router.patch("/admin/v1/organizations/:orgId/channels/:channelId", async (req, res) => {
    const organizationId = organizationOf(res);
    res.json(await updateChannel(ctx, organizationId, String(req.params.channelId), parseBody(UpdateChannelRequest, req)));
  });
}
