import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { E2E } from "./stack";

/** Every /api/v1 route, with a valid-looking body for the POSTs. */
const ROUTES: Array<{ method: "GET" | "POST"; path: string }> = [
  { method: "GET", path: "/api/v1/ping" },
  { method: "GET", path: "/api/v1/contacts" },
  { method: "GET", path: "/api/v1/conversations" },
  { method: "POST", path: "/api/v1/messages" },
  { method: "POST", path: "/api/v1/opt-outs" },
];

/** Shapes a careless or hostile client sends. */
function junk(i: number): unknown {
  const pick = [
    null,
    [],
    [1, 2, 3],
    "string",
    42,
    true,
    {},
    { to: null, text: null },
    { to: 12345, text: ["a"] },
    { to: "+1555", text: "" },
    { to: "+15550001111", text: "x".repeat(5000) },
    { to: "+15550001111", text: "hi", messagingChannelId: { $ne: null } },
    { action: "delete", messagingChannelId: "ch_x", phone: "+15550001111" },
    { action: "set", messagingChannelId: "", phone: "" },
    { action: "set", messagingChannelId: "ch_x", phone: "+15550001111", reason: "r".repeat(600) },
    { __proto__: { polluted: true }, to: "+15550001111" },
    { to: "\u0000\u0000\u0000", text: "\ud800" },
    { to: "+".repeat(40), text: "hi" },
    { deep: JSON.parse("[".repeat(200) + "]".repeat(200)) },
    { to: "+15550001111", text: "nul \u0000 inside" },
    { action: "set", messagingChannelId: "ch_\u0000", phone: "+15550001111", reason: "\u0000" },
  ];
  return pick[i % pick.length];
}

describe("e2e: contract rules on every route", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  let org: { id: string; key: string };
  before(async () => {
    await e2e.start();
    org = await e2e.organization();
  });
  after(() => e2e.stop());

  for (const route of ROUTES) {
    it(`${route.method} ${route.path}: 401 with the exact envelope without a valid key`, async () => {
      for (const token of [undefined, "svc_" + "A".repeat(40)]) {
        const res = await e2e.call(route.method, route.path, { token, body: route.method === "POST" ? {} : undefined });
        expect(res.status).to.equal(401);
        expect(res.body).to.deep.equal({ error: { code: "UNAUTHORIZED", message: "Invalid API key" } });
      }
    });

    it(`${route.method} ${route.path}: carries the RateLimit headers`, async () => {
      const res = await e2e.call(route.method, route.path, { token: org.key, body: route.method === "POST" ? {} : undefined });
      expect(res.headers.get("ratelimit-policy")).to.match(/^"org";q=\d+;w=\d+$/);
      expect(res.headers.get("ratelimit")).to.match(/^"org";r=\d+;t=\d+$/);
    });
  }

  for (const route of ROUTES.filter((r) => r.method === "POST")) {
    it(`${route.method} ${route.path}: INVALID_JSON, PAYLOAD_TOO_LARGE and VALIDATION_ERROR details`, async () => {
      const bad = await fetch(e2e.stack.url + route.path, {
        method: "POST",
        headers: { Authorization: `Bearer ${org.key}`, "Content-Type": "application/json" },
        body: '{"to": "+1555',
      });
      expect(bad.status).to.equal(400);
      expect(((await bad.json()) as any).error.code).to.equal("INVALID_JSON");

      const big = await e2e.call("POST", route.path, { token: org.key, body: { text: "x".repeat(1_100_000) } });
      expect(big.status).to.equal(413);
      expect(big.body.error.code).to.equal("PAYLOAD_TOO_LARGE");

      const invalid = await e2e.call("POST", route.path, { token: org.key, body: {} });
      expect(invalid.status).to.equal(400);
      expect(invalid.body.error.code).to.equal("VALIDATION_ERROR");
      expect(invalid.body.error.details).to.be.an("array").that.is.not.empty;
      for (const d of invalid.body.error.details) expect(d).to.have.keys("path", "message");
    });

    it(`${route.method} ${route.path}: never a 500, whatever the body`, async () => {
      for (let i = 0; i < 40; i++) {
        const body = i % 7 === 6 ? randomBytes(64).toString("latin1") : JSON.stringify(junk(i));
        const res = await fetch(e2e.stack.url + route.path, {
          method: "POST",
          headers: { Authorization: `Bearer ${org.key}`, "Content-Type": "application/json" },
          body,
        });
        const text = await res.text();
        expect(res.status, `${body.slice(0, 80)} → ${text.slice(0, 200)}`).to.be.within(400, 499);
        const parsed = JSON.parse(text);
        expect(parsed.error.code).to.be.a("string");
        expect(text).to.not.match(/at .+\.js:\d+/);
      }
    });
  }

  it("refuses NUL (%00) in paths and queries with 400, never a 500", async () => {
    for (const path of ["/api/v1/contacts/%00", "/api/v1/contacts?cursor=%00", "/api/v1/conversations?limit=1%00", "/api/v1/contacts?phone=%2B1555%00"]) {
      const res = await e2e.call("GET", path, { token: org.key });
      expect(res.status, path).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
    }
    const admin = await fetch(`${e2e.stack.url}/admin/v1/organizations/%00`, { headers: { Authorization: `Bearer ${e2e.stack.adminToken}` } });
    expect(admin.status).to.equal(400);
  });

  it("list endpoints validate limit and refuse cursors they did not issue", async () => {
    for (const path of ["/api/v1/contacts", "/api/v1/conversations"]) {
      for (const limit of ["0", "101", "abc", "1.5"]) {
        const res = await e2e.call("GET", `${path}?limit=${limit}`, { token: org.key });
        expect(res.status, `${path} limit=${limit}`).to.equal(400);
        expect(res.body.error.code).to.equal("VALIDATION_ERROR");
        expect(res.body.error.details[0].path).to.equal("query.limit");
      }
      const cursor = await e2e.call("GET", `${path}?cursor=${Buffer.from('{"id":"x"}').toString("base64url")}`, { token: org.key });
      expect(cursor.status).to.equal(400);
      expect(cursor.body.error.code).to.equal("INVALID_CURSOR");
      const empty = await e2e.call("GET", path, { token: org.key });
      expect(empty.status).to.equal(200);
      expect(empty.body.items).to.be.an("array");
    }
  });

  it("keeps organizations apart: another organization's channel is 404 for sends and opt-outs", async () => {
    const other = await e2e.organization();
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${other.id}/channels`, {
      name: "Theirs",
      phoneNumber: "+15550100009",
      providerPhoneNumberId: `pn-${randomBytes(6).toString("hex")}`,
    });
    expect(channel.status).to.equal(201);
    const send = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+15550001111", text: "hi", messagingChannelId: channel.body.id } });
    expect(send.status).to.equal(404);
    expect(send.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    const optOut = await e2e.call("POST", "/api/v1/opt-outs", {
      token: org.key,
      body: { action: "set", messagingChannelId: channel.body.id, phone: "+15550001111" },
    });
    expect(optOut.status).to.equal(404);
    expect(optOut.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    const noChannel = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: "+15550001111", text: "hi" } });
    expect(noChannel.status).to.equal(404);
    expect(noChannel.body.error.code).to.equal("CHANNEL_NOT_FOUND");
  });

  it("replays an idempotent send and refuses the key with another body", async () => {
    const o = await e2e.organization();
    const ch = await e2e.admin("POST", `/admin/v1/organizations/${o.id}/channels`, {
      name: "Main",
      phoneNumber: "+15550100010",
      providerPhoneNumberId: `pn-${randomBytes(6).toString("hex")}`,
      connected: false,
    });
    const headers = { "Idempotency-Key": "order-42" };
    const first = await e2e.call("POST", "/api/v1/messages", { token: o.key, body: { to: "+15550001111", text: "hi" }, headers });
    expect(first.status).to.equal(403);
    expect(first.body.error.code).to.equal("PROVIDER_NOT_CONNECTED");
    const again = await e2e.call("POST", "/api/v1/messages", { token: o.key, body: { to: "+15550001111", text: "hi" }, headers });
    expect(again.status).to.equal(403);
    expect(again.headers.get("idempotent-replayed")).to.equal("true");
    const other = await e2e.call("POST", "/api/v1/messages", { token: o.key, body: { to: "+15550001111", text: "bye" }, headers });
    expect(other.status).to.equal(422);
    expect(other.body.error.code).to.equal("IDEMPOTENCY_KEY_REUSED");
    expect(ch.status).to.equal(201);
    // The key is the organization's, not the endpoint's: a bulk send under it is another request too.
    const bulk = await e2e.call("POST", "/api/v1/templates/send", {
      token: o.key,
      body: { templateId: "tpl_none", messagingChannelId: ch.body.id, recipients: [{ phone: "+15550001111" }] },
      headers,
    });
    expect(bulk.status).to.equal(422);
    expect(bulk.body.error.code).to.equal("IDEMPOTENCY_KEY_REUSED");
  });
});
