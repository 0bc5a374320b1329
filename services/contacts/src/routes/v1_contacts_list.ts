import type { Router } from "express";
import { PageQuery } from "@platform/contracts";
import { organizationOf, parseQuery } from "@platform/http";
import type { ContactsContext } from "../use-cases/context";
import { listContacts } from "../use-cases/list-contacts";

/** GET /api/v1/contacts?limit&cursor → {items, nextCursor?} */
export function v1ContactsList(router: Router, ctx: ContactsContext): void {
  router.get("/api/v1/contacts", async (req, res) => {
    const organizationId = organizationOf(res);
    const query = parseQuery(PageQuery, req);
    res.json(await listContacts(ctx, organizationId, query));
  });
}
