import type { Router } from "express";
import { CreateOrganizationRequest, PageQuery, UpdateOrganizationRequest } from "@platform/contracts";
import { isCreatedPosition, parseBody, parseQuery, type CreatedPosition, type CursorCodec } from "@platform/http";
import { pageInCreationOrder } from "../db/created-order";
import type { Organizations } from "../use-cases/organizations";

export function registerAdminOrganizations(router: Router, deps: { organizations: Organizations; cursors: CursorCodec<CreatedPosition> }): void {
  const { organizations } = deps;

  router.post("/admin/v1/organizations", async (req, res) => {
    res.status(201).json(await organizations.create(parseBody(CreateOrganizationRequest, req)));
  });

  router.get("/admin/v1/organizations", async (req, res) => {
    const q = parseQuery(PageQuery, req);
    const after = q.cursor !== undefined ? deps.cursors.decode(q.cursor, isCreatedPosition) : undefined;
    res.json(pageInCreationOrder(await organizations.list(q.limit, after), q.limit, deps.cursors, (o) => organizations.toDto(o)));
  });

  router.get("/admin/v1/organizations/:orgId", async (req, res) => {
    res.json(organizations.toDto(await organizations.get(String(req.params.orgId))));
  });

  router.patch("/admin/v1/organizations/:orgId", async (req, res) => {
    res.json(await organizations.update(String(req.params.orgId), parseBody(UpdateOrganizationRequest, req)));
  });
}
