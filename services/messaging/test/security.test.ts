import { expect } from "chai";
import request from "supertest";
import { newOrg, sharedHarness, type Harness } from "./helpers/harness";

describe("security: internal token and organization", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  const routes: Array<[string, string]> = [
    ["post", "/api/v1/messages"],
    ["get", "/api/v1/conversations"],
    ["get", "/admin/v1/organizations/org_x/channels"],
    ["post", "/admin/v1/organizations/org_x/channels"],
    ["patch", "/admin/v1/organizations/org_x/channels/ch_x"],
  ];

  it("refuses every route without the internal token, or with a wrong one (401)", async () => {
    for (const [method, path] of routes) {
      const agent = request(h.svc.url) as unknown as Record<string, (p: string) => request.Test>;
      const none = await agent[method](path).set("x-organization-id", newOrg()).send({});
      expect(none.status, `${method} ${path}`).to.equal(401);
      expect(none.body.error.code).to.equal("UNAUTHORIZED");
      const wrong = await agent[method](path).set("x-internal-token", "x".repeat(40)).set("x-organization-id", newOrg()).send({});
      expect(wrong.status).to.equal(401);
    }
  });

  it("refuses a call without the organization header (401), never guessing a tenant", async () => {
    for (const [method, path] of routes) {
      const agent = request(h.svc.url) as unknown as Record<string, (p: string) => request.Test>;
      const res = await agent[method](path).set("x-internal-token", h.env.internalToken).send({});
      expect(res.status, `${method} ${path}`).to.equal(401);
    }
  });
});
