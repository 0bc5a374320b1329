import type { Router } from "express";
import { ManualOptOutRequest, normalizePhone } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { ContactsContext } from "../use-cases/context";
import { setOptOut } from "../use-cases/opt-outs";

/** POST /admin/v1/organizations/{orgId}/opt-outs {messagingChannelId, phone, reason?} → opt-out state (source manual), 200 */
export function adminOptOutsCreate(router: Router, ctx: ContactsContext): void {
  router.post("/admin/v1/organizations/:orgId/opt-outs", async (req, res) => {
    // The gateway checked the organization of the path and forwards it as x-organization-id.
    const organizationId = organizationOf(res);
    const body = parseBody(ManualOptOutRequest, req);
    const state = await setOptOut(ctx, {
      organizationId,
      messagingChannelId: body.messagingChannelId,
      phone: normalizePhone(body.phone)!,
      source: "manual",
      reason: body.reason ?? null,
    });
    res.status(200).json(state);
  });
}
