import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { eventually } from "@platform/testing";
import { E2E } from "./stack";

const PASSWORD = "correct horse battery staple";

interface Signed {
  cookie: string;
  csrf: string;
  userId: string;
}

/**
 * The console's API through the whole stack (issue 15): an Owner sets up an
 * organization through `/console/api` only, a Member is refused every write by
 * the gateway, and the cross-organization matrix — every console route that
 * takes an id, with another organization's ids — answers 404 from whichever
 * service owns the resource, while lists show none of the other's rows.
 */
describe("e2e: console API", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  before(() => e2e.start({ CONSOLE_SCRYPT_COST: "12" }));
  after(() => e2e.stop());

  async function consoleCall(method: string, path: string, s?: Signed, body?: unknown) {
    const headers: Record<string, string> = { Origin: e2e.stack.url };
    if (s) Object.assign(headers, { Cookie: s.cookie, "X-CSRF-Token": s.csrf });
    return e2e.call(method, path, { headers, body: body ?? (method === "GET" ? undefined : {}) });
  }

  async function signIn(email: string): Promise<Signed> {
    const res = await fetch(`${e2e.stack.url}/console/api/session`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: e2e.stack.url },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    const body = (await res.json()) as { csrfToken: string; user: { id: string } };
    expect(res.status, JSON.stringify(body)).to.equal(201);
    const cookie = res.headers.getSetCookie()[0];
    expect(cookie).to.match(/; HttpOnly; Secure; SameSite=Strict$/);
    return { cookie: cookie.split(";")[0], csrf: body.csrfToken, userId: body.user.id };
  }

  /** An organization set up by its Owner through the console only (the first Owner from the admin API). */
  async function tenant() {
    const org = await e2e.admin("POST", "/admin/v1/organizations", { name: "Console Org" });
    const email = `owner-${randomBytes(6).toString("hex")}@example.com`;
    const user = await e2e.admin("POST", `/admin/v1/organizations/${org.body.id}/users`, { email, password: PASSWORD, role: "owner" });
    expect(user.status).to.equal(201);
    const owner = await signIn(email);

    const channel = await consoleCall("POST", "/console/api/channels", owner, {
      name: "Main", phoneNumber: "+15550100000", providerPhoneNumberId: `pn-${randomBytes(6).toString("hex")}`, isDefault: true, messagesPerSecond: 20,
    });
    expect(channel.status, JSON.stringify(channel.body)).to.equal(201);
    const key = await consoleCall("POST", "/console/api/api-keys", owner, { name: "console" });
    expect(key.status).to.equal(201);
    expect((await e2e.call("GET", "/api/v1/ping", { token: key.body.key })).status).to.equal(200);
    const webhook = await consoleCall("POST", "/console/api/webhooks", owner, { url: "http://127.0.0.1:9/hooks", events: ["message.received"] });
    expect(webhook.status, JSON.stringify(webhook.body)).to.equal(201);
    const template = await consoleCall("POST", "/console/api/templates", owner, {
      name: "order_update", language: "en_US", category: "UTILITY", status: "approved", bodyParameterCount: 1,
      providerTemplateId: String(5_000_000 + Math.floor(Math.random() * 1e9)), templateAccountId: "waba_console",
    });
    expect(template.status, JSON.stringify(template.body)).to.equal(201);
    const job = await e2e.call("POST", "/api/v1/templates/send", {
      token: key.body.key,
      body: {
        templateId: template.body.providerTemplateId, templateAccountId: "waba_console", messagingChannelId: channel.body.id,
        scheduledAt: new Date(Date.now() + 24 * 3600_000).toISOString(), recipients: [{ phone: "+15550001111", bodyParameters: ["Ann"] }],
      },
    });
    expect(job.status, JSON.stringify(job.body)).to.equal(200);
    const optOut = await consoleCall("POST", "/console/api/opt-outs", owner, { messagingChannelId: channel.body.id, phone: "+15550002222" });
    expect(optOut.status, JSON.stringify(optOut.body)).to.equal(200);

    const invitation = await consoleCall("POST", "/console/api/invitations", owner, { email: `member-${randomBytes(6).toString("hex")}@example.com`, role: "member" });
    expect(invitation.status).to.equal(201);
    const accepted = await consoleCall("POST", "/console/api/invitations/accept", undefined, { token: invitation.body.token, password: PASSWORD });
    expect(accepted.status).to.equal(201);
    const member = await signIn(invitation.body.email);
    const pending = await consoleCall("POST", "/console/api/invitations", owner, { email: `later-${randomBytes(6).toString("hex")}@example.com`, role: "admin" });
    expect(pending.status).to.equal(201);
    return {
      id: org.body.id as string,
      owner,
      member,
      key: key.body.key as string,
      ids: {
        keyId: key.body.id as string,
        userId: member.userId,
        invitationId: pending.body.id as string,
        channelId: channel.body.id as string,
        webhookId: webhook.body.id as string,
        templateId: template.body.id as string,
        jobId: job.body.id as string,
      },
    };
  }

  type IdKind = keyof Awaited<ReturnType<typeof tenant>>["ids"];
  /** Every console route that names a resource. */
  const BY_ID: Array<[string, string, IdKind, unknown?]> = [
    ["DELETE", "/console/api/api-keys/:id", "keyId"],
    ["PATCH", "/console/api/users/:id", "userId", { role: "owner" }],
    ["DELETE", "/console/api/users/:id", "userId"],
    ["DELETE", "/console/api/invitations/:id", "invitationId"],
    ["PATCH", "/console/api/channels/:id", "channelId", { name: "stolen" }],
    ["PATCH", "/console/api/webhooks/:id", "webhookId", { active: true }],
    ["POST", "/console/api/webhooks/:id/test", "webhookId"],
    ["GET", "/console/api/webhooks/:id/deliveries", "webhookId"],
    ["DELETE", "/console/api/webhooks/:id", "webhookId"],
    ["PATCH", "/console/api/templates/:id", "templateId", { status: "paused" }],
    ["GET", "/console/api/template-jobs/:id", "jobId"],
    ["POST", "/console/api/template-jobs/:id/cancel", "jobId"],
  ];

  it("refuses cross-organization access on every console route: another organization's ids answer 404, lists show none of its rows", async () => {
    const a = await tenant();
    const b = await tenant();
    const aIds = [a.id, ...Object.values(a.ids)];

    const probes: Array<[string, string, unknown?]> = BY_ID.map(([method, path, kind, body]) => [method, path.replace(":id", a.ids[kind]), body]);
    probes.push(["POST", "/console/api/opt-outs", { messagingChannelId: a.ids.channelId, phone: "+15550002222" }]);
    probes.push(["POST", "/console/api/opt-outs/actions", { action: "clear", messagingChannelId: a.ids.channelId, phone: "+15550002222" }]);
    for (const [method, path, body] of probes) {
      const res = await consoleCall(method, path, b.owner, body);
      expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).to.equal(404);
      expect(res.body.error.code, path).to.match(/^(NOT_FOUND|CHANNEL_NOT_FOUND|TEMPLATE_NOT_FOUND)$/);
      expect(JSON.stringify(res.body), path).to.not.contain(a.id);
    }
    // B's own ids on the same routes are found (the 404s above are not a broken route); reads only, nothing destroyed.
    for (const [method, path, kind] of BY_ID.filter(([m]) => m === "GET")) {
      const res = await consoleCall(method, path.replace(":id", b.ids[kind]), b.owner);
      expect(res.status, `${path} for B's own id`).to.equal(200);
    }

    const lists: Array<[string, string]> = [
      ["/console/api/organization", b.id],
      ["/console/api/users", b.owner.userId],
      ["/console/api/invitations", b.ids.invitationId],
      ["/console/api/api-keys?limit=100", b.ids.keyId],
      ["/console/api/channels?limit=100", b.ids.channelId],
      ["/console/api/webhooks?limit=100", b.ids.webhookId],
      ["/console/api/templates?limit=100", b.ids.templateId],
      ["/console/api/template-jobs?limit=100", b.ids.jobId],
      // Both organizations opted this number out on their own channel: B sees its own record only.
      ["/console/api/opt-outs?phone=%2B15550002222", b.ids.channelId],
      ["/console/api/conversations?limit=100", ""],
      ["/console/api/contacts?limit=100", ""],
      [`/console/api/analytics?startDate=${encodeURIComponent(new Date(Date.now() - 3600_000).toISOString())}&endDate=${encodeURIComponent(new Date().toISOString())}`, ""],
    ];
    for (const [path, own] of lists) {
      const res = await consoleCall("GET", path, b.member);
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).to.equal(200);
      const text = JSON.stringify(res.body);
      if (own) expect(text, `${path} shows B's own`).to.contain(own);
      for (const id of aIds) expect(text, `${path} shows A's ${id}`).to.not.contain(id);
    }

    // A is untouched: its key works, its channel keeps its name, its job is still scheduled, its member can sign in.
    expect((await e2e.call("GET", "/api/v1/ping", { token: a.key })).status).to.equal(200);
    const channels = await consoleCall("GET", "/console/api/channels", a.member);
    expect(channels.body.items.find((c: { id: string }) => c.id === a.ids.channelId).name).to.equal("Main");
    const job = await consoleCall("GET", `/console/api/template-jobs/${a.ids.jobId}`, a.member);
    expect(job.body.status).to.not.equal("cancelled");
  });

  it("refuses a Member every write through the stack, and lets an Owner do it", async () => {
    const t = await tenant();
    for (const [method, path, kind, body] of BY_ID.filter(([m]) => m !== "GET")) {
      const res = await consoleCall(method, path.replace(":id", t.ids[kind]), t.member, body);
      expect(res.status, `${method} ${path}`).to.equal(403);
      expect(res.body.error.code).to.equal("FORBIDDEN");
    }
    const created = await consoleCall("POST", "/console/api/api-keys", t.member, { name: "nope" });
    expect(created.status).to.equal(403);
    const cancel = await consoleCall("POST", `/console/api/template-jobs/${t.ids.jobId}/cancel`, t.owner);
    expect(cancel.status, JSON.stringify(cancel.body)).to.equal(200);
    const revoked = await consoleCall("DELETE", `/console/api/api-keys/${t.ids.keyId}`, t.owner);
    expect(revoked.status).to.equal(204);
    expect((await e2e.call("GET", "/api/v1/ping", { token: t.key })).status).to.equal(401);
  });

  it("runs the settings screens' calls: webhook test and attempt log, deactivate and re-enable, throughput, manual opt-out refusing a send, settings", async () => {
    const t = await tenant();
    const received: string[] = [];
    const server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
      const webhook = await consoleCall("POST", "/console/api/webhooks", t.owner, { url, events: ["message.received", "optout.created"] });
      expect(webhook.status).to.equal(201);
      expect(webhook.body.secret, "the signing secret is shown once").to.be.a("string");
      const listed = await consoleCall("GET", "/console/api/webhooks", t.member);
      expect(JSON.stringify(listed.body)).to.not.contain(webhook.body.secret);

      const test = await consoleCall("POST", `/console/api/webhooks/${webhook.body.id}/test`, t.owner);
      expect(test.status, JSON.stringify(test.body)).to.equal(200);
      expect(test.body).to.include({ delivered: true, responseStatus: 204 });
      const log = await eventually(async () => {
        const res = await consoleCall("GET", `/console/api/webhooks/${webhook.body.id}/deliveries`, t.member);
        return res.body.items?.length > 0 ? res.body.items : undefined;
      }, 20_000);
      expect(log[0]).to.include({ responseStatus: 204 });

      const off = await consoleCall("PATCH", `/console/api/webhooks/${webhook.body.id}`, t.owner, { active: false });
      expect(off.body.active).to.equal(false);
      const on = await consoleCall("PATCH", `/console/api/webhooks/${webhook.body.id}`, t.owner, { active: true });
      expect(on.status).to.equal(200);
      expect(on.body.active).to.equal(true);

      const throughput = await consoleCall("PATCH", `/console/api/channels/${t.ids.channelId}`, t.owner, { messagesPerSecond: 5 });
      expect(throughput.status, JSON.stringify(throughput.body)).to.equal(200);
      expect(throughput.body).to.include({ messagesPerSecond: 5, isDefault: true });

      const optOut = await consoleCall("POST", "/console/api/opt-outs", t.owner, { messagingChannelId: t.ids.channelId, phone: "+15550007777", reason: "asked by phone" });
      expect(optOut.status).to.equal(200);
      expect(optOut.body.active).to.equal(true);
      await eventually(() => received.some((b) => b.includes("optout.created") && b.includes('"manual"')), 20_000);
      const blocked = await e2e.call("POST", "/api/v1/messages", { token: t.key, body: { to: "+15550007777", text: "hello" } });
      expect(blocked.status).to.equal(403);
      expect(blocked.body.error.code).to.equal("CONTACT_OPTED_OUT");
      const cleared = await consoleCall("POST", "/console/api/opt-outs/actions", t.owner, { action: "clear", messagingChannelId: t.ids.channelId, phone: "+15550007777" });
      expect(cleared.status).to.equal(200);
      expect(cleared.body.active).to.equal(false);

      const settings = await consoleCall("PATCH", "/console/api/organization", t.owner, { optOutKeywords: ["STOP", "BASTA"], rateLimit: { perSecond: 20, burst: 40 } });
      expect(settings.status).to.equal(200);
      const read = await consoleCall("GET", "/console/api/organization", t.member);
      expect(read.body).to.deep.include({ plan: "growth", optOutKeywords: ["STOP", "BASTA"], rateLimit: { perSecond: 20, burst: 40 } });
      const ping = await e2e.call("GET", "/api/v1/ping", { token: t.key });
      expect(ping.headers.get("ratelimit-policy")).to.contain("40");
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
