import { createHash } from "node:crypto";
import http from "node:http";
import { expect } from "chai";
import request from "supertest";
import { echoServer, GatewayHarness } from "./harness";
import { CONSOLE_ENV, consoleClient, organizationWithUsers, PASSWORD, signIn, uniqueEmail } from "./console-helpers";
import { CONSOLE_READS, CONSOLE_WRITES } from "./console-routes";

describe("gateway: console users, sessions and CSRF", () => {
  const h = new GatewayHarness();
  before(() => h.start({ ...CONSOLE_ENV, CONSOLE_SIGN_IN_PER_IP: "100000" }));
  after(() => h.stop());

  describe("users", () => {
    it("creates an organization's first Owner with the admin token, never showing the password hash", async () => {
      const org = await h.organization();
      const email = uniqueEmail("Owner").toUpperCase();
      const res = await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email, password: PASSWORD, role: "owner" }).expect(201);
      expect(res.body).to.include({ organizationId: org.id, email: email.toLowerCase(), role: "owner" });
      expect(res.body.id).to.match(/^usr_/);
      expect(res.body).to.not.have.property("passwordHash");
      const [row] = await h.db.query(`SELECT password_hash FROM gateway.users WHERE id = $1`, [res.body.id]);
      expect(row.password_hash).to.match(/^scrypt\$4096\$8\$1\$/);
      expect(row.password_hash).to.not.include(PASSWORD);
      const list = await h.admin().get(`/admin/v1/organizations/${org.id}/users`).expect(200);
      expect(list.body.items.map((u: { id: string }) => u.id)).to.deep.equal([res.body.id]);
    });

    it("lists users with the cursor pagination of every list: pages in creation order, bad limit or cursor refused", async () => {
      const org = await h.organization();
      const ids: string[] = [];
      for (let k = 0; k < 3; k++) ids.push((await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email: uniqueEmail(`p${k}`), password: PASSWORD }).expect(201)).body.id);
      const first = await h.admin().get(`/admin/v1/organizations/${org.id}/users?limit=2`).expect(200);
      expect(first.body.items.map((u: { id: string }) => u.id)).to.deep.equal(ids.slice(0, 2));
      const second = await h.admin().get(`/admin/v1/organizations/${org.id}/users?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`).expect(200);
      expect(second.body.items.map((u: { id: string }) => u.id)).to.deep.equal(ids.slice(2));
      expect(second.body).to.not.have.property("nextCursor");
      for (const limit of ["0", "101", "abc"]) {
        const bad = await h.admin().get(`/admin/v1/organizations/${org.id}/users?limit=${limit}`).expect(400);
        expect(bad.body.error.code).to.equal("VALIDATION_ERROR");
      }
      const forged = await h.admin().get(`/admin/v1/organizations/${org.id}/users?cursor=bogus`).expect(400);
      expect(forged.body.error.code).to.equal("INVALID_CURSOR");
      // Another list's cursor is not this one's.
      for (const name of ["k1", "k2"]) await h.admin().post(`/admin/v1/organizations/${org.id}/api-keys`).send({ name }).expect(201);
      const keys = await h.admin().get(`/admin/v1/organizations/${org.id}/api-keys?limit=1`).expect(200);
      const foreign = await h.admin().get(`/admin/v1/organizations/${org.id}/users?cursor=${encodeURIComponent(keys.body.nextCursor)}`).expect(400);
      expect(foreign.body.error.code).to.equal("INVALID_CURSOR");
      // Nor another organization's: a cursor pages the list of the organization it was issued for.
      const other = await h.organization();
      for (const path of ["users", "api-keys"]) {
        const mine = path === "users" ? first : keys;
        const res = await h.admin().get(`/admin/v1/organizations/${other.id}/${path}?cursor=${encodeURIComponent(mine.body.nextCursor)}`).expect(400);
        expect(res.body.error.code, path).to.equal("INVALID_CURSOR");
      }
      const keysNext = await h.admin().get(`/admin/v1/organizations/${org.id}/api-keys?limit=1&cursor=${encodeURIComponent(keys.body.nextCursor)}`).expect(200);
      expect(keysNext.body.items).to.have.length(1);
    });

    it("refuses a short password, a taken email, an unknown organization and a missing admin token", async () => {
      const org = await h.organization();
      const email = uniqueEmail("o");
      const short = await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email, password: "short", role: "owner" }).expect(400);
      expect(short.body.error.code).to.equal("VALIDATION_ERROR");
      expect(short.body.error.details[0].path).to.equal("password");
      await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email, password: PASSWORD }).expect(201);
      const taken = await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email, password: PASSWORD }).expect(409);
      expect(taken.body.error.code).to.equal("CONFLICT");
      await h.admin().post(`/admin/v1/organizations/org_nope/users`).send({ email: uniqueEmail("x"), password: PASSWORD }).expect(404);
      await request(h.url).post(`/admin/v1/organizations/${org.id}/users`).send({ email: uniqueEmail("x"), password: PASSWORD }).expect(401);
    });

    it("lets an Owner invite; the token is shown once, works once, and the invitee signs in with the invited role", async () => {
      const o = await organizationWithUsers(h);
      const email = uniqueEmail("invitee");
      const inv = await consoleClient(h, o.owner).post("/console/api/invitations").send({ email, role: "member" }).expect(201);
      expect(inv.body).to.include({ email, role: "member" });
      expect(inv.body.token).to.match(/^inv_/);
      const [row] = await h.db.query(`SELECT token_hash FROM gateway.invitations WHERE id = $1`, [inv.body.id]);
      expect(row.token_hash).to.equal(createHash("sha256").update(inv.body.token).digest("hex"));

      const short = await consoleClient(h).post("/console/api/invitations/accept").send({ token: inv.body.token, password: "short" }).expect(400);
      expect(short.body.error.details[0].path).to.equal("password");
      const accepted = await consoleClient(h).post("/console/api/invitations/accept").send({ token: inv.body.token, password: PASSWORD }).expect(201);
      expect(accepted.body).to.include({ organizationId: o.id, email, role: "member" });
      await consoleClient(h).post("/console/api/invitations/accept").send({ token: inv.body.token, password: PASSWORD }).expect(404);
      const member = await signIn(h, email);
      expect(member.user.role).to.equal("member");

      for (const who of [o.admin, o.member]) {
        const refused = await consoleClient(h, who).post("/console/api/invitations").send({ email: uniqueEmail("n"), role: "member" }).expect(403);
        expect(refused.body.error.code).to.equal("FORBIDDEN");
      }
      const users = await consoleClient(h, o.member).get("/console/api/users").expect(200);
      expect(users.body.items.map((u: { email: string }) => u.email)).to.include(email);

      // Pending invitations are listed without their token; a withdrawn one stops working at once.
      const other = await consoleClient(h, o.owner).post("/console/api/invitations").send({ email: uniqueEmail("later"), role: "admin" }).expect(201);
      const pending = await consoleClient(h, o.member).get("/console/api/invitations").expect(200);
      expect(pending.body.items.map((i: { id: string }) => i.id)).to.deep.equal([other.body.id]);
      expect(JSON.stringify(pending.body)).to.not.include(other.body.token);
      await consoleClient(h, o.admin).delete(`/console/api/invitations/${other.body.id}`).expect(403);
      await consoleClient(h, o.owner).delete(`/console/api/invitations/${other.body.id}`).expect(204);
      await consoleClient(h).post("/console/api/invitations/accept").send({ token: other.body.token, password: PASSWORD }).expect(404);
      expect((await consoleClient(h, o.owner).get("/console/api/invitations").expect(200)).body.items).to.deep.equal([]);
    });
  });

  describe("sessions", () => {
    it("sets an HttpOnly, Secure, SameSite=Strict __Host- cookie holding an opaque id stored hashed", async () => {
      const o = await organizationWithUsers(h);
      const email = uniqueEmail("c");
      await h.admin().post(`/admin/v1/organizations/${o.id}/users`).send({ email, password: PASSWORD }).expect(201);
      const res = await request(h.url).post("/console/api/session").set("Origin", h.url).send({ email, password: PASSWORD }).expect(201);
      expect(res.headers["cache-control"]).to.equal("no-store");
      const cookie = ([] as string[]).concat(res.headers["set-cookie"])[0];
      const attrs = cookie.split(";").map((p) => p.trim());
      expect(attrs[0]).to.match(/^__Host-console-session=[A-Za-z0-9_-]{43}$/);
      expect(attrs.slice(1)).to.include.members(["Path=/", "HttpOnly", "Secure", "SameSite=Strict", "Max-Age=28800"]);
      expect(attrs.some((a) => /^domain=/i.test(a))).to.equal(false);
      const id = attrs[0].split("=")[1];
      expect(cookie).to.not.include(res.body.csrfToken);
      const rows = await h.db.query(`SELECT id_hash, expires_at FROM gateway.sessions WHERE user_id = $1`, [res.body.user.id]);
      expect(rows).to.have.length(1);
      expect(rows[0].id_hash).to.equal(createHash("sha256").update(id).digest("hex"));
      expect(res.body.user).to.include({ email, organizationId: o.id, role: "owner" });
      const me = await request(h.url).get("/console/api/session").set("Cookie", attrs[0]).expect(200);
      expect(me.body.csrfToken).to.equal(res.body.csrfToken);
    });

    it("answers one 401 for an unknown email and a wrong password", async () => {
      const o = await organizationWithUsers(h);
      const wrong = await request(h.url).post("/console/api/session").set("Origin", h.url).send({ email: o.owner.user.email, password: "wrong password!!" }).expect(401);
      const unknown = await request(h.url).post("/console/api/session").set("Origin", h.url).send({ email: uniqueEmail("ghost"), password: PASSWORD }).expect(401);
      expect(wrong.body).to.deep.equal(unknown.body);
      expect(wrong.headers["set-cookie"]).to.equal(undefined);
    });

    it("refuses every console route without a session, with an unknown cookie and with an expired session", async () => {
      const o = await organizationWithUsers(h);
      await request(h.url).get("/console/api/api-keys").expect(401);
      await request(h.url).get("/console/api/api-keys").set("Cookie", "__Host-console-session=forged").expect(401);
      await consoleClient(h, o.owner).get("/console/api/api-keys").expect(200);
      await h.db.query(`UPDATE gateway.sessions SET expires_at = now() - interval '1 second' WHERE user_id = $1`, [o.owner.user.id]);
      const expired = await consoleClient(h, o.owner).get("/console/api/api-keys").expect(401);
      expect(expired.body.error.code).to.equal("UNAUTHORIZED");
      await consoleClient(h, o.owner).get("/console/api/session").expect(401);
    });

    it("sweeps expired sessions and finished throttle windows, and nothing live", async () => {
      const o = await organizationWithUsers(h);
      await h.db.query(`UPDATE gateway.sessions SET expires_at = now() - interval '1 second' WHERE user_id = $1`, [o.admin.user.id]);
      await h.db.query(`INSERT INTO gateway.sign_in_attempts (bucket, window_start, attempts) VALUES ($1, now() - interval '1 day', 3), ($2, now(), 1)`, [`email:old-${o.id}`, `email:new-${o.id}`]);
      const swept = await h.replicas[0].gateway.sessions.sweep();
      expect(swept.sessions).to.be.at.least(1);
      expect(swept.attempts).to.be.at.least(1);
      expect(await h.db.query(`SELECT 1 FROM gateway.sessions WHERE user_id = $1`, [o.admin.user.id])).to.have.length(0);
      expect(await h.db.query(`SELECT 1 FROM gateway.sessions WHERE user_id = $1`, [o.owner.user.id])).to.have.length(1);
      const buckets = await h.db.query(`SELECT bucket FROM gateway.sign_in_attempts WHERE bucket LIKE $1`, [`%${o.id}`]);
      expect(buckets.map((b: { bucket: string }) => b.bucket)).to.deep.equal([`email:new-${o.id}`]);
      await consoleClient(h, o.owner).get("/console/api/session").expect(200);
    });

    it("signs out: the session row is deleted, the cookie cleared, the old cookie refused; any role may sign out", async () => {
      const o = await organizationWithUsers(h);
      for (const who of [o.owner, o.member]) {
        const res = await consoleClient(h, who).delete("/console/api/session").expect(204);
        expect(([] as string[]).concat(res.headers["set-cookie"])[0]).to.match(/^__Host-console-session=; Path=\/; Max-Age=0; HttpOnly; Secure; SameSite=Strict$/);
        const rows = await h.db.query(`SELECT 1 FROM gateway.sessions WHERE user_id = $1`, [who.user.id]);
        expect(rows).to.have.length(0);
        await consoleClient(h, who).get("/console/api/api-keys").expect(401);
      }
      // The admin's session is its own.
      await consoleClient(h, o.admin).get("/console/api/api-keys").expect(200);
    });
  });

  describe("CSRF", () => {
    it("refuses a state change without the token, with a wrong one, or with another session's token", async () => {
      const o = await organizationWithUsers(h);
      const agent = request(h.url);
      const bare = await agent.post("/console/api/api-keys").set("Origin", h.url).set("Cookie", o.owner.cookie).send({ name: "k" }).expect(403);
      expect(bare.body.error.code).to.equal("FORBIDDEN");
      await agent.post("/console/api/api-keys").set("Origin", h.url).set("Cookie", o.owner.cookie).set("X-CSRF-Token", "x".repeat(43)).send({ name: "k" }).expect(403);
      await agent.post("/console/api/api-keys").set("Origin", h.url).set("Cookie", o.owner.cookie).set("X-CSRF-Token", o.admin.csrf).send({ name: "k" }).expect(403);
      await agent.delete("/console/api/session").set("Origin", h.url).set("Cookie", o.owner.cookie).expect(403);
      await agent.patch("/console/api/organization").set("Origin", h.url).set("Cookie", o.owner.cookie).send({ name: "x" }).expect(403);
      await agent.post("/console/api/channels").set("Origin", h.url).set("Cookie", o.owner.cookie).send({}).expect(403);
      const keys = await consoleClient(h, o.owner).get("/console/api/api-keys").expect(200);
      expect(keys.body.items.filter((k: { name: string }) => k.name === "k")).to.have.length(0);
      await consoleClient(h, o.owner).post("/console/api/api-keys").send({ name: "k" }).expect(201);
    });

    it("refuses a foreign, a missing or a null Origin even with the right token; sign-in and accepting too", async () => {
      const o = await organizationWithUsers(h);
      const agent = request(h.url);
      const with_ = (r: request.Test) => r.set("Cookie", o.owner.cookie).set("X-CSRF-Token", o.owner.csrf);
      const foreign = await with_(agent.post("/console/api/api-keys")).set("Origin", "https://evil.example").send({ name: "k" }).expect(403);
      expect(foreign.body.error.code).to.equal("FORBIDDEN");
      await with_(agent.post("/console/api/api-keys")).send({ name: "k" }).expect(403);
      await with_(agent.post("/console/api/api-keys")).set("Origin", "null").send({ name: "k" }).expect(403);
      await with_(agent.post("/console/api/api-keys")).set("Origin", `http://127.0.0.1:1`).send({ name: "k" }).expect(403);
      await agent.post("/console/api/session").set("Origin", "https://evil.example").send({ email: o.owner.user.email, password: PASSWORD }).expect(403);
      await agent.post("/console/api/session").send({ email: o.owner.user.email, password: PASSWORD }).expect(403);
      await agent.post("/console/api/invitations/accept").set("Origin", "https://evil.example").send({ token: "inv_x", password: PASSWORD }).expect(403);
      // Reads need no token and no Origin.
      await agent.get("/console/api/api-keys").set("Cookie", o.owner.cookie).expect(200);
    });

    it("takes the configured console origins instead of the request's host", async () => {
      const replica = await h.addReplica({ ...CONSOLE_ENV, CONSOLE_ORIGINS: "https://console.example.com" });
      const o = await organizationWithUsers(h);
      const agent = request(replica.url);
      const send = (origin: string) => agent.post("/console/api/api-keys").set("Origin", origin).set("Cookie", o.owner.cookie).set("X-CSRF-Token", o.owner.csrf).send({ name: "k" });
      expect((await send(replica.url)).status).to.equal(403);
      expect((await send("https://console.example.com")).status).to.equal(201);
    });
  });
});

describe("gateway: console sign-in rate limit", () => {
  const h = new GatewayHarness();
  before(() => h.start({ ...CONSOLE_ENV, CONSOLE_SIGN_IN_PER_EMAIL: "3", CONSOLE_SIGN_IN_PER_IP: "8", CONSOLE_SIGN_IN_WINDOW_SECONDS: "600" }));
  after(() => h.stop());

  const attempt = (email: string, password: string) => request(h.url).post("/console/api/session").set("Origin", h.url).send({ email, password });

  it("answers 429 RATE_LIMITED with Retry-After per email, even for the right password, and a success resets the count", async () => {
    const org = await h.organization();
    const email = uniqueEmail("rl");
    await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email, password: PASSWORD }).expect(201);
    expect((await attempt(email, "wrong password!!")).status).to.equal(401);
    expect((await attempt(email, PASSWORD)).status).to.equal(201); // resets this email's window
    for (let i = 0; i < 3; i++) expect((await attempt(email, "wrong password!!")).status).to.equal(401);
    const limited = await attempt(email, PASSWORD);
    expect(limited.status).to.equal(429);
    expect(limited.body.error.code).to.equal("RATE_LIMITED");
    const retry = Number(limited.headers["retry-after"]);
    expect(retry).to.be.within(1, 600);
    expect(limited.headers["set-cookie"]).to.equal(undefined);
  });

  it("limits per client address across emails", async () => {
    // Every attempt from this address (127.0.0.1) counts, whatever the email, including refused ones; the limit is 8.
    const [{ attempts }] = await h.db.query(`SELECT attempts FROM gateway.sign_in_attempts WHERE bucket = 'ip:127.0.0.1'`);
    expect(attempts).to.equal(6);
    expect((await attempt(uniqueEmail("a"), PASSWORD)).status).to.equal(401);
    expect((await attempt(uniqueEmail("b"), PASSWORD)).status).to.equal(401);
    const limited = await attempt(uniqueEmail("c"), PASSWORD);
    expect(limited.status).to.equal(429);
    expect(limited.headers["retry-after"]).to.match(/^\d+$/);
  });
});

/**
 * The cross-organization matrix at the gateway: every console route, signed in to B, with A's ids.
 * Gateway-owned resources answer 404; a service's route is always called for B (path and header),
 * whatever A id, header or query the client sends, so the service scoping by organization answers 404
 * (shown through the whole stack in test-e2e/test/console.e2e.test.ts).
 */
describe("gateway: console cross-organization matrix", () => {
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

  it("answers 404 or calls the service for the session's organization only, on every route", async () => {
    const a = await organizationWithUsers(h);
    const b = await organizationWithUsers(h);
    const invitation = await consoleClient(h, a.owner).post("/console/api/invitations").send({ email: uniqueEmail("pending"), role: "admin" }).expect(201);
    const aIds = { keyId: a.keyId, userId: a.member.user.id, invitationId: invitation.body.id, channelId: "ch_a", webhookId: "wh_a", templateId: "tpl_a", jobId: "job_a" };
    const GATEWAY_OWNED = ["/console/api/api-keys/:id", "/console/api/users/:id", "/console/api/invitations/:id"];
    for (const route of [...CONSOLE_WRITES, ...CONSOLE_READS]) {
      const base = route.id ? route.path.replace(":id", aIds[route.id]) : route.path;
      const path = `${base}${base.includes("?") ? "&" : "?"}orgId=${a.id}&organizationId=${a.id}`;
      const res = await consoleClient(h, b.owner)[route.method](path).set("X-Organization-Id", a.id).send(route.body ?? {});
      const what = `${route.method} ${route.path}`;
      if (GATEWAY_OWNED.includes(route.path)) {
        expect(res.status, what).to.equal(404);
        expect(res.body.error.code, what).to.equal("NOT_FOUND");
      } else if (res.body.url !== undefined) {
        expect(res.body.headers["x-organization-id"], what).to.equal(b.id);
        expect(res.body.url.split("?")[0], what).to.not.include(a.id);
        if (res.body.url.startsWith("/admin/")) expect(res.body.url, what).to.match(new RegExp(`^/admin/v1/organizations/${b.id}/`));
      } else {
        // Served by the gateway itself (organization, users, API keys, invitations): B's own data.
        expect(res.status, what).to.be.oneOf([200, 201, 204]);
        expect(JSON.stringify(res.body), what).to.not.include(a.id);
      }
    }
    // A is untouched: its key not revoked, its member still there, its settings unchanged.
    const keys = await consoleClient(h, a.owner).get("/console/api/api-keys").expect(200);
    expect(keys.body.items.find((k: { id: string }) => k.id === a.keyId).revokedAt).to.equal(null);
    const users = await consoleClient(h, a.owner).get("/console/api/users").expect(200);
    expect(users.body.items.find((u: { id: string }) => u.id === a.member.user.id).role).to.equal("member");
    const org = await consoleClient(h, a.owner).get("/console/api/organization").expect(200);
    expect(org.body.rateLimit).to.deep.equal({ perSecond: 50, burst: 100 });
    const pending = await consoleClient(h, a.owner).get("/console/api/invitations").expect(200);
    expect(pending.body.items.map((i: { id: string }) => i.id)).to.deep.equal([invitation.body.id]);
  });

  it("refuses a dot segment or an encoded separator that would climb out of the session's organization", async () => {
    const a = await organizationWithUsers(h);
    const b = await organizationWithUsers(h);
    const port = new URL(h.url).port;
    for (const path of [
      `/console/api/channels/../../${a.id}/channels`,
      `/console/api/channels/..%2F..%2F${a.id}%2Fchannels`,
      `/console/api/channels/%2e%2e/%2e%2e/${a.id}/channels`,
      `/console/api/webhooks/..\\..\\${a.id}`,
    ]) {
      // node:http sends the path as given (no URL normalisation), as a hostile client would.
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port, path, method: "GET", headers: { Cookie: b.owner.cookie } }, (r) => {
          let body = "";
          r.on("data", (c) => (body += c));
          r.on("end", () => resolve({ status: r.statusCode ?? 0, body }));
        });
        req.on("error", reject);
        req.end();
      });
      expect(res.status, path).to.equal(404);
      expect(JSON.parse(res.body).error.code, path).to.equal("NOT_FOUND");
    }
  });
});
