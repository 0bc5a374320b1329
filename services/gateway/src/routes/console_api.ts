import type { Router } from "express";
import { ConsoleUpdateOrganizationRequest, CreateApiKeyRequest, CreateInvitationRequest, PageQuery, UpdateUserRoleRequest } from "@platform/contracts";
import { parseBody, parseQuery } from "@platform/http";
import { requireRole, sessionOf } from "../auth/console";
import type { ApiKeys } from "../use-cases/api-keys";
import type { ConsoleUsers } from "../use-cases/console-users";
import type { Organizations } from "../use-cases/organizations";

/**
 * The console's own routes (behind the session, CSRF and `writesNeed("owner", "admin")`):
 * the same use cases as /admin/v1, with the organization always the session's.
 */
export function registerConsoleApi(router: Router, deps: { users: ConsoleUsers; apiKeys: ApiKeys; organizations: Organizations }): void {
  const { users, apiKeys, organizations } = deps;
  const org = (res: Parameters<typeof sessionOf>[0]) => sessionOf(res).session.organizationId;
  const owner = requireRole("owner");

  router.get("/console/api/organization", async (_req, res) => {
    res.json(organizations.toDto(await organizations.get(org(res))));
  });
  router.patch("/console/api/organization", async (req, res) => {
    res.json(await organizations.update(org(res), parseBody(ConsoleUpdateOrganizationRequest, req)));
  });

  router.get("/console/api/users", async (_req, res) => {
    res.json({ items: await users.list(org(res)) });
  });
  router.patch("/console/api/users/:userId", owner, async (req, res) => {
    const { role } = parseBody(UpdateUserRoleRequest, req);
    res.json(await users.setRole(org(res), String(req.params.userId), role, sessionOf(res).user.id));
  });
  router.delete("/console/api/users/:userId", owner, async (req, res) => {
    await users.remove(org(res), String(req.params.userId), sessionOf(res).user.id);
    res.status(204).end();
  });
  router.get("/console/api/invitations", async (_req, res) => {
    res.json({ items: await users.pendingInvitations(org(res)) });
  });
  router.delete("/console/api/invitations/:invitationId", owner, async (req, res) => {
    await users.revokeInvitation(org(res), String(req.params.invitationId));
    res.status(204).end();
  });
  router.post("/console/api/invitations", owner, async (req, res) => {
    res.status(201).json(await users.invite(org(res), sessionOf(res).user.id, parseBody(CreateInvitationRequest, req)));
  });

  router.post("/console/api/api-keys", async (req, res) => {
    res.status(201).json(await apiKeys.create(org(res), parseBody(CreateApiKeyRequest, req).name));
  });
  router.get("/console/api/api-keys", async (req, res) => {
    res.json(await apiKeys.list(org(res), parseQuery(PageQuery, req)));
  });
  router.delete("/console/api/api-keys/:keyId", async (req, res) => {
    await apiKeys.revoke(org(res), String(req.params.keyId));
    res.status(204).end();
  });
}
