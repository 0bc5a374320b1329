import { expect } from "chai";
import request from "supertest";
import { echoServer, GatewayHarness } from "./harness";
import { CONSOLE_ENV, consoleClient, organizationWithUsers } from "./console-helpers";
import { CONSOLE_READS, CONSOLE_WRITES, type ConsoleRoute } from "./console-routes";

/** Services stood in for by an echo server: what the gateway forwards, and what it refuses before forwarding. */
describe("gateway: console API routes and roles", () => {
  const h = new GatewayHarness();
  let echo: Awaited<ReturnType<typeof echoServer>>;
  before(async () => {
    echo = await echoServer();
    const urls = { MESSAGING_URL: echo.url, CONTACTS_URL: echo.url, TEMPLATE_JOBS_URL: echo.url, ANALYTICS_URL: echo.url, WEBHOOK_DISPATCHER_URL: echo.url };
    await h.start({ ...CONSOLE_ENV, CONSOLE_SIGN_IN_PER_IP: "100000", ...urls });
  });
  after(async () => {
    await h.stop();
    await echo.close();
  });

  const fill = (r: ConsoleRoute, ids: Record<string, string>) => (r.id ? r.path.replace(":id", ids[r.id] ?? "x") : r.path);

  it("refuses a Member every write with 403 FORBIDDEN before anything is changed or forwarded", async () => {
    const o = await organizationWithUsers(h);
    const ids = { keyId: o.keyId, userId: o.admin.user.id, invitationId: "inv_1", channelId: "ch_1", webhookId: "wh_1", templateId: "tpl_1", jobId: "job_1" };
    for (const route of CONSOLE_WRITES) {
      const res = await consoleClient(h, o.member)[route.method](fill(route, ids)).send(route.body ?? {});
      expect(res.status, `${route.method} ${route.path}`).to.equal(403);
      expect(res.body.error.code, route.path).to.equal("FORBIDDEN");
      expect(res.body).to.not.have.property("url"); // the echo service never saw it
    }
    const keys = await consoleClient(h, o.owner).get("/console/api/api-keys").expect(200);
    expect(keys.body.items.map((k: { id: string }) => k.id)).to.deep.equal([o.keyId]);
    expect(keys.body.items[0].revokedAt).to.equal(null);
    const users = await consoleClient(h, o.owner).get("/console/api/users").expect(200);
    expect(users.body.items).to.have.length(3);
  });

  it("lets a Member read every route", async () => {
    const o = await organizationWithUsers(h);
    for (const route of CONSOLE_READS) {
      const res = await consoleClient(h, o.member).get(fill(route, { webhookId: "wh_1", jobId: "job_1" }));
      expect(res.status, route.path).to.equal(200);
    }
  });

  it("forwards service routes to the service's own route for the session's organization, without the cookie or CSRF token", async function () {
    this.timeout(60_000); // 34 round trips through the gateway: slow on a loaded machine, not a speed assertion
    const o = await organizationWithUsers(h);
    const cases: Array<[string, string, string]> = [
      ["post", "/console/api/channels", `/admin/v1/organizations/${o.id}/channels`],
      ["patch", "/console/api/channels/ch_1", `/admin/v1/organizations/${o.id}/channels/ch_1`],
      ["get", "/console/api/channels?limit=2", `/admin/v1/organizations/${o.id}/channels?limit=2`],
      ["post", "/console/api/webhooks/wh_1/test", `/admin/v1/organizations/${o.id}/webhooks/wh_1/test`],
      ["get", "/console/api/webhooks/wh_1/deliveries", `/admin/v1/organizations/${o.id}/webhooks/wh_1/deliveries`],
      ["get", "/console/api/templates", `/admin/v1/organizations/${o.id}/templates`],
      ["post", "/console/api/opt-outs", `/admin/v1/organizations/${o.id}/opt-outs`],
      ["post", "/console/api/opt-outs/actions", `/api/v1/opt-outs`],
      ["get", "/console/api/opt-outs?phone=%2B15550100001", `/admin/v1/organizations/${o.id}/opt-outs?phone=%2B15550100001`],
      ["get", "/console/api/template-jobs", `/admin/v1/organizations/${o.id}/template-jobs`],
      ["get", "/console/api/template-jobs?limit=5&cursor=c", `/admin/v1/organizations/${o.id}/template-jobs?limit=5&cursor=c`],
      ["post", "/console/api/template-jobs", `/api/v1/templates/send`],
      ["get", "/console/api/template-jobs/job_1", `/api/v1/templates/send/job_1`],
      ["post", "/console/api/template-jobs/job_1/cancel", `/api/v1/templates/send/job_1/cancel`],
      ["get", "/console/api/conversations?limit=5", `/api/v1/conversations?limit=5`],
      ["get", "/console/api/contacts?limit=5", `/api/v1/contacts?limit=5`],
      ["get", "/console/api/analytics?start=a&end=b", `/api/v1/analytics?start=a&end=b`],
    ];
    for (const [method, path, upstream] of cases) {
      for (const who of [o.owner, o.admin]) {
        const client = consoleClient(h, who) as unknown as Record<string, (p: string) => ReturnType<ReturnType<typeof consoleClient>["get"]>>;
        const req = client[method](path).set("X-Organization-Id", "org_forged");
        const res = method === "get" ? await req : await req.send({ some: "body" });
        expect(res.status, path).to.equal(200);
        expect(res.body.method).to.equal(method.toUpperCase());
        expect(res.body.url, path).to.equal(upstream);
        expect(res.body.headers["x-organization-id"]).to.equal(o.id);
        expect(res.body.headers).to.not.have.property("cookie");
        expect(res.body.headers).to.not.have.property("x-csrf-token");
        expect(res.headers["cache-control"]).to.equal("no-store");
        if (method !== "get") expect(JSON.parse(res.body.body)).to.deep.equal({ some: "body" });
      }
    }
  });

  it("applies the organization's plan to the console's actions as to the API's (402 PAYMENT_REQUIRED, nothing forwarded)", async () => {
    const starter = await organizationWithUsers(h, { plan: "starter" });
    const inactive = await organizationWithUsers(h, { plan: "inactive" });
    const refused = async (o: typeof starter, method: "post" | "patch", path: string) => {
      const res = await consoleClient(h, o.owner)[method](path).send({ some: "body" });
      expect([res.status, res.body.error?.code], `${o.id} ${method} ${path}`).to.deep.equal([402, "PAYMENT_REQUIRED"]);
      expect(res.body).to.not.have.property("url"); // the echo service never saw it
    };
    // starter: everything but creating a template job.
    await refused(starter, "post", "/console/api/template-jobs");
    await refused(starter, "post", "/console/api/template-jobs/");
    await refused(starter, "post", "/console/api/template-jobs//");
    for (const path of ["/console/api/opt-outs/actions", "/console/api/template-jobs/job_1/cancel", "/console/api/channels"]) {
      expect((await consoleClient(h, starter.owner).post(path).send({})).status, path).to.equal(200);
    }
    // inactive: reads only, every write refused (sends, opt-outs, settings of the services).
    for (const path of ["/console/api/template-jobs", "/console/api/template-jobs/job_1/cancel", "/console/api/opt-outs/actions", "/console/api/opt-outs", "/console/api/channels", "/console/api/webhooks"]) {
      await refused(inactive, "post", path);
    }
    await refused(inactive, "patch", "/console/api/channels/ch_1");
    // A keyed template job goes to the service marked, which answers the key's first answer or 402 (as on the API).
    const keyed = await consoleClient(h, starter.owner).post("/console/api/template-jobs").set("Idempotency-Key", "console-k1").send({ some: "body" });
    expect([keyed.status, keyed.body.headers?.["x-plan-refused"]]).to.deep.equal([200, "1"]);
    for (const path of ["/console/api/contacts", "/console/api/template-jobs", "/console/api/channels", "/console/api/analytics?start=a&end=b"]) {
      expect((await consoleClient(h, inactive.member).get(path)).status, path).to.equal(200);
    }
  });

  it("an Idempotency-Key on the console's template job is the organization's: used before on /api/v1/messages, 422 and not forwarded", async () => {
    const o = await organizationWithUsers(h);
    const key = `console-${Math.random().toString(36).slice(2)}`;
    const api = await request(h.url).post("/api/v1/messages").set("Authorization", `Bearer ${o.key}`).set("Idempotency-Key", key).send({});
    expect(api.status).to.equal(200);
    const res = await consoleClient(h, o.owner).post("/console/api/template-jobs").set("Idempotency-Key", key).send({ some: "body" });
    expect([res.status, res.body.error?.code]).to.deep.equal([422, "IDEMPOTENCY_KEY_REUSED"]);
    expect(res.body).to.not.have.property("url");
    const fresh = await consoleClient(h, o.owner).post("/console/api/template-jobs").set("Idempotency-Key", `${key}-2`).send({ some: "body" });
    expect(fresh.status).to.equal(200);
    expect(fresh.body.url).to.equal("/api/v1/templates/send");
  });

  it("manages API keys: created with the value shown once, listed with prefix, creation and last use, revoked", async () => {
    const o = await organizationWithUsers(h);
    const created = await consoleClient(h, o.admin).post("/console/api/api-keys").send({ name: "console" }).expect(201);
    expect(created.body.key).to.match(/^svc_/);
    const list = await consoleClient(h, o.member).get("/console/api/api-keys").expect(200);
    const summary = list.body.items.find((k: { id: string }) => k.id === created.body.id);
    expect(summary).to.include({ name: "console", keyPrefix: created.body.key.slice(0, 8), lastUsedAt: null, revokedAt: null });
    expect(summary).to.not.have.property("key");
    expect(JSON.stringify(list.body)).to.not.include(created.body.key);
    await consoleClient(h, o.owner).delete(`/console/api/api-keys/${created.body.id}`).expect(204);
    const after = await consoleClient(h, o.member).get("/console/api/api-keys").expect(200);
    expect(after.body.items.find((k: { id: string }) => k.id === created.body.id).revokedAt).to.be.a("string");
  });

  it("reads and changes organization settings, the plan read-only", async () => {
    const o = await organizationWithUsers(h);
    const got = await consoleClient(h, o.member).get("/console/api/organization").expect(200);
    expect(got.body).to.include({ id: o.id, plan: "growth" });
    const patched = await consoleClient(h, o.admin).patch("/console/api/organization").send({ rateLimit: { perSecond: 7, burst: 9 }, optOutKeywords: ["BASTA"] }).expect(200);
    expect(patched.body).to.deep.include({ rateLimit: { perSecond: 7, burst: 9 }, optOutKeywords: ["BASTA"], plan: "growth" });
    const plan = await consoleClient(h, o.owner).patch("/console/api/organization").send({ plan: "starter" }).expect(400);
    expect(plan.body.error.code).to.equal("VALIDATION_ERROR");
    expect((await h.admin().get(`/admin/v1/organizations/${o.id}`).expect(200)).body.plan).to.equal("growth");
  });

  it("lets an Owner change another user's role, applied at once, but not their own", async () => {
    const o = await organizationWithUsers(h);
    await consoleClient(h, o.member).post("/console/api/api-keys").send({ name: "m" }).expect(403);
    await consoleClient(h, o.admin).patch(`/console/api/users/${o.member.user.id}`).send({ role: "admin" }).expect(403);
    const bad = await consoleClient(h, o.owner).patch(`/console/api/users/${o.member.user.id}`).send({ role: "root" }).expect(400);
    expect(bad.body.error.details[0].path).to.equal("role");
    const promoted = await consoleClient(h, o.owner).patch(`/console/api/users/${o.member.user.id}`).send({ role: "admin" }).expect(200);
    expect(promoted.body).to.include({ id: o.member.user.id, role: "admin" });
    await consoleClient(h, o.member).post("/console/api/api-keys").send({ name: "m" }).expect(201);
    const me = await consoleClient(h, o.member).get("/console/api/session").expect(200);
    expect(me.body.user.role).to.equal("admin");
    const self = await consoleClient(h, o.owner).patch(`/console/api/users/${o.owner.user.id}`).send({ role: "member" }).expect(409);
    expect(self.body.error.code).to.equal("CONFLICT");
  });

  it("lets an Owner remove a user (whose sessions end at once) but not themselves", async () => {
    const o = await organizationWithUsers(h);
    await consoleClient(h, o.admin).delete(`/console/api/users/${o.member.user.id}`).expect(403);
    await consoleClient(h, o.owner).delete(`/console/api/users/${o.member.user.id}`).expect(204);
    await consoleClient(h, o.member).get("/console/api/organization").expect(401);
    const self = await consoleClient(h, o.owner).delete(`/console/api/users/${o.owner.user.id}`).expect(409);
    expect(self.body.error.code).to.equal("CONFLICT");
  });

  it("answers the contract's 404 envelope for an unknown console route after the session check", async () => {
    const o = await organizationWithUsers(h);
    const res = await consoleClient(h, o.owner).get("/console/api/nope").expect(404);
    expect(res.body.error.code).to.equal("NOT_FOUND");
  });
});
