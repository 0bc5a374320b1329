import type { Router } from "express";
import { buildOpenApiDocument } from "@platform/contracts";

/** Public, no key: generated once from the contracts package at start. */
export function registerOpenApi(router: Router): void {
  const body = JSON.stringify(buildOpenApiDocument());
  router.get("/api-reference/openapi.json", (_req, res) => {
    res.type("application/json").send(body);
  });
}
