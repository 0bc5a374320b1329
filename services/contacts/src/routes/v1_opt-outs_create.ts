import type { Router } from "express";
import { OptOutRequest, normalizePhone } from "@platform/contracts";
import { organizationOf, parseBody } from "@platform/http";
import type { ContactsContext } from "../use-cases/context";
import { clearOptOut, setOptOut } from "../use-cases/opt-outs";

/** POST /api/v1/opt-outs {action: set|clear, messagingChannelId, phone, reason?} → opt-out state */
export function v1OptOutsCreate(router: Router, ctx: ContactsContext): void {
  router.post("/api/v1/opt-outs", async (req, res) => {
    const organizationId = organizationOf(res);
    const body = parseBody(OptOutRequest, req);
    // PhoneInput already refused numbers that do not normalize.
    const key = { organizationId, messagingChannelId: body.messagingChannelId, phone: normalizePhone(body.phone)! };
    const state =
      body.action === "set"
        ? await setOptOut(ctx, { ...key, source: "api", reason: body.reason ?? null })
        : await clearOptOut(ctx, key);
    res.status(200).json(state);
  });
}
