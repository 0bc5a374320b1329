import type { Router } from "express";
import { CreateUserRequest, PageQuery } from "@platform/contracts";
import { parseBody, parseQuery } from "@platform/http";
import type { ConsoleUsers } from "../use-cases/console-users";
import type { Organizations } from "../use-cases/organizations";

/** The operator creates an organization's first Owner (or any user) with the admin token; Owners invite the rest. */
export function registerAdminUsers(router: Router, deps: { users: ConsoleUsers; organizations: Organizations }): void {
  router.post("/admin/v1/organizations/:orgId/users", async (req, res) => {
    const org = await deps.organizations.get(String(req.params.orgId));
    res.status(201).json(await deps.users.create(org.id, parseBody(CreateUserRequest, req)));
  });

  /** `{items, nextCursor?}` in creation order, `limit` 1 to 100 (default 25): the same pagination as /api/v1. */
  router.get("/admin/v1/organizations/:orgId/users", async (req, res) => {
    const org = await deps.organizations.get(String(req.params.orgId));
    res.json(await deps.users.listPage(org.id, parseQuery(PageQuery, req)));
  });
}
