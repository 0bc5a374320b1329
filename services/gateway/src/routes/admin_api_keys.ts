import type { Router } from "express";
import { CreateApiKeyRequest, PageQuery } from "@platform/contracts";
import { parseBody, parseQuery } from "@platform/http";
import type { ApiKeys } from "../use-cases/api-keys";
import type { Organizations } from "../use-cases/organizations";

export function registerAdminApiKeys(router: Router, deps: { apiKeys: ApiKeys; organizations: Organizations }): void {
  const { apiKeys, organizations } = deps;

  router.post("/admin/v1/organizations/:orgId/api-keys", async (req, res) => {
    const org = await organizations.get(String(req.params.orgId));
    const { name } = parseBody(CreateApiKeyRequest, req);
    res.status(201).json(await apiKeys.create(org.id, name));
  });

  /** `{items, nextCursor?}` in creation order, `limit` 1 to 100 (default 25): the same pagination as /api/v1. */
  router.get("/admin/v1/organizations/:orgId/api-keys", async (req, res) => {
    const org = await organizations.get(String(req.params.orgId));
    res.json(await apiKeys.list(org.id, parseQuery(PageQuery, req)));
  });

  router.delete("/admin/v1/organizations/:orgId/api-keys/:keyId", async (req, res) => {
    await apiKeys.revoke(String(req.params.orgId), String(req.params.keyId));
    res.status(204).end();
  });
}
