import type { Router } from "express";
import { CreateChannelRequest } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { MessagingContext } from "../context";
import { createChannel } from "../use-cases/channels";

/** POST /admin/v1/organizations/:orgId/channels → 201 channel. */
export function adminChannelsCreate(router: Router, ctx: MessagingContext): void {
  router.post("/admin/v1/organizations/:orgId/channels", async (req, res) => {
    const organizationId = organizationOf(res);
    res.status(201).json(await createChannel(ctx, organizationId, parseBody(CreateChannelRequest, req)));
  });
}
