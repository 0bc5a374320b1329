import type { Router } from "express";
import { CreateApiKeyRequest } from "@platform/contracts";
import { parseBody } from "@platform/http";
import type { ApiKeys } from "../use-cases/api-keys";
import type { Organizations } from "../use-cases/organizations";

export function registerAdminApiKeys(router: Router, deps: { apiKeys: ApiKeys; organizations: Organizations }): void {
  const { apiKeys, organizations } = deps;

  router.post("/admin/v1/organizations/:orgId/api-keys", async (req, res) => {
    const org = await organizations.get(String(req.params.orgId));
    const { name } = parseBody(CreateApiKeyRequest, req);
    res.status(201).json(await apiKeys.create(org.id, name));
  });

  router.get("/admin/v1/organizations/:orgId/api-keys", async (req, res) => {
    const org = await organizations.get(String(req.params.orgId));
    res.json({ items: await apiKeys.list(org.id) });
  });

  router.delete("/admin/v1/organizations/:orgId/api-keys/:keyId", async (req, res) => {
    await apiKeys.revoke(String(req.params.orgId), String(req.params.keyId));
    res.status(204).end();
  });
}
