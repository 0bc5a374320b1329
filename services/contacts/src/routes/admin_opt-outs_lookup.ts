import type { Router } from "express";
import { OptOutLookupQuery, normalizePhone } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { ContactsContext } from "../use-cases/context";
import { lookUpOptOuts } from "../use-cases/opt-outs";

/**
 * GET /admin/v1/organizations/{orgId}/opt-outs?phone= → {phone, items: the phone's record per channel}, 200.
 * The console's opt-out look-up (issue 15); the phone is normalized like on every write.
 */
export function adminOptOutsLookup(router: Router, ctx: ContactsContext): void {
  router.get("/admin/v1/organizations/:orgId/opt-outs", async (req, res) => {
    const { phone } = parseQuery(OptOutLookupQuery, req);
    res.json(await lookUpOptOuts(ctx, organizationOf(res), normalizePhone(phone)!));
  });
}
