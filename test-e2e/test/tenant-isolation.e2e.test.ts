import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { eventually } from "@platform/testing";
import { E2E } from "./stack";

/**
 * The tenant isolation matrix: for every route and resource kind, organization
 * B — through its API key and through the admin API scoped to B — gets 404 for
 * A's ids (never 403, never A's data) and sees none of A's rows in any list.
 * A's resources are made real first (a conversation, a contact, an opt-out, a
 * webhook with delivery attempts), so every probe targets something that exists.
 */
interface Tenant {
  id: string;
  key: string;
  keyId: string;
  channelId: string;
  phoneNumberId: string;
  webhookId: string;
}

describe("e2e: tenant isolation matrix", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  const hooks: string[] = [];
  let server: http.Server;
  let hookUrl: string;
  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        hooks.push(Buffer.concat(chunks).toString("utf8"));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    await e2e.start();
  });
  after(async () => {
    await e2e.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  async function tenant(phone: string): Promise<Tenant & { contactId: string; conversationId: string; optOutId: string; templateId: string; jobId: string; messageId: string }> {
    const org = await e2e.organization();
    const phoneNumberId = `pn-${randomBytes(6).toString("hex")}`;
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/channels`, { name: "Main", phoneNumber: "+15550100000", providerPhoneNumberId: phoneNumberId });
    expect(channel.status).to.equal(201);
    const webhook = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/webhooks`, { url: hookUrl, events: ["message.received"] });
    expect(webhook.status).to.equal(201);
    const inbound = await fetch(`${e2e.stack.simulatorUrl}/_sim/inbound`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ phoneNumberId, from: phone.slice(1), text: "hello", name: "Ana" }),
    });
    expect(inbound.status).to.be.within(200, 299);
    const contact = await eventually(async () => (await e2e.call("GET", "/api/v1/contacts", { token: org.key })).body.items?.find((c: { phone: string }) => c.phone === phone), 20_000);
    const conversation = await eventually(async () => (await e2e.call("GET", "/api/v1/conversations", { token: org.key })).body.items?.[0], 20_000);
    await eventually(() => hooks.some((h) => h.includes(org.id)), 20_000);
    // An outbound message (counted by analytics) before the opt-out, and a template with a job.
    const sent = await e2e.call("POST", "/api/v1/messages", { token: org.key, body: { to: phone, text: "reply", messagingChannelId: channel.body.id } });
    expect(sent.status).to.equal(200);
    const template = await e2e.admin("POST", `/admin/v1/organizations/${org.id}/templates`, {
      name: "notice", language: "en_US", status: "approved", bodyParameterCount: 0,
      providerTemplateId: String(7_000_000 + Math.floor(Math.random() * 1e9)), templateAccountId: `waba_${org.id}`,
    });
    expect(template.status).to.equal(201);
    const job = await e2e.call("POST", "/api/v1/templates/send", {
      token: org.key,
      body: { templateId: template.body.id, messagingChannelId: channel.body.id, recipients: [{ phone: "+15550009999" }], scheduledAt: "2099-01-01T00:00:00Z" },
    });
    expect(job.status, JSON.stringify(job.body)).to.equal(200);
    const optOut = await e2e.call("POST", "/api/v1/opt-outs", { token: org.key, body: { action: "set", messagingChannelId: channel.body.id, phone } });
    expect(optOut.status, JSON.stringify(optOut.body)).to.equal(200);
    return {
      templateId: template.body.id,
      jobId: job.body.id,
      messageId: sent.body.id,
      ...org,
      channelId: channel.body.id,
      phoneNumberId,
      webhookId: webhook.body.id,
      contactId: contact.id,
      conversationId: conversation.id,
      optOutId: optOut.body.optOutId,
    };
  }

  it("B's key and B's admin scope get 404 for each of A's ids and see none of A's rows", async () => {
    const a = await tenant("+15550003333");
    const b = await tenant("+15550004444");
    const aIds = [a.id, a.keyId, a.channelId, a.webhookId, a.contactId, a.conversationId, a.optOutId, a.templateId, a.jobId, a.messageId];
    const B = `/admin/v1/organizations/${b.id}`;

    // Every probe B can make at one of A's resources: [what, method, path, body].
    const probes: Array<[string, string, string, unknown?]> = [
      ["send from A's channel", "POST", "/api/v1/messages", { to: "+15550003333", text: "hi", messagingChannelId: a.channelId }],
      ["opt-out on A's channel", "POST", "/api/v1/opt-outs", { action: "clear", messagingChannelId: a.channelId, phone: "+15550003333" }],
      ["A's channel (admin update)", "PATCH", `${B}/channels/${a.channelId}`, { name: "stolen" }],
      ["A's API key (admin revoke)", "DELETE", `${B}/api-keys/${a.keyId}`],
      ["A's webhook (admin update)", "PATCH", `${B}/webhooks/${a.webhookId}`, { active: false }],
      ["A's webhook (admin test)", "POST", `${B}/webhooks/${a.webhookId}/test`],
      ["A's webhook deliveries", "GET", `${B}/webhooks/${a.webhookId}/deliveries`],
      ["A's webhook (admin delete)", "DELETE", `${B}/webhooks/${a.webhookId}`],
      ["manual opt-out on A's channel", "POST", `${B}/opt-outs`, { messagingChannelId: a.channelId, phone: "+15550003333" }],
      ["send A's template", "POST", "/api/v1/templates/send", { templateId: a.templateId, messagingChannelId: b.channelId, recipients: [{ phone: "+15550004444" }] }],
      ["send from A's channel (template)", "POST", "/api/v1/templates/send", { templateId: b.templateId, messagingChannelId: a.channelId, recipients: [{ phone: "+15550004444" }] }],
      ["A's job", "GET", `/api/v1/templates/send/${a.jobId}`],
      ["cancel A's job", "POST", `/api/v1/templates/send/${a.jobId}/cancel`],
      ["A's template (admin update)", "PATCH", `${B}/templates/${a.templateId}`, { status: "paused" }],
    ];
    for (const [what, method, path, body] of probes) {
      const res = path.startsWith("/admin/") ? await e2e.admin(method, path, body) : await e2e.call(method, path, { token: b.key, body });
      expect(res.status, what).to.equal(404);
      expect(res.body.error.code, what).to.match(/^(NOT_FOUND|CHANNEL_NOT_FOUND|TEMPLATE_NOT_FOUND)$/);
      expect(JSON.stringify(res.body), what).to.not.contain(a.id);
    }

    // Every list B can read: none of A's ids, and B's own rows are there (the list is not just empty).
    const lists: Array<[string, string, string]> = [
      ["contacts", `/api/v1/contacts?limit=100`, b.contactId],
      ["conversations", `/api/v1/conversations?limit=100`, b.conversationId],
      ["admin channels", `${B}/channels?limit=100`, b.channelId],
      ["admin API keys", `${B}/api-keys?limit=100`, b.keyId],
      ["admin webhooks", `${B}/webhooks?limit=100`, b.webhookId],
      ["admin webhook deliveries", `${B}/webhooks/${b.webhookId}/deliveries?limit=100`, b.webhookId],
      ["templates", `/api/v1/templates?limit=100`, b.templateId],
      ["admin templates", `${B}/templates?limit=100`, b.templateId],
    ];
    for (const [what, path, own] of lists) {
      const res = path.startsWith("/admin/") ? await e2e.admin("GET", path) : await e2e.call("GET", path, { token: b.key });
      expect(res.status, what).to.equal(200);
      const text = JSON.stringify(res.body);
      if (what !== "admin webhook deliveries") expect(text, `${what} lists B's own`).to.contain(own);
      for (const id of aIds) expect(text, `${what} shows A's ${id}`).to.not.contain(id);
    }

    // Analytics counts B's own outbound message only (A sent one too, in the same range).
    const day = new Date().toISOString().slice(0, 10);
    const analytics = await eventually(async () => {
      const res = await e2e.call("GET", `/api/v1/analytics?startDate=${day}&endDate=${day}`, { token: b.key });
      return res.status === 200 && res.body.outboundMessages.total >= 1 ? res.body : undefined;
    }, 20_000);
    expect(analytics.outboundMessages.total).to.equal(1);

    // A is untouched by every probe: its key works, its channel and webhook are as they were, its opt-out holds.
    expect((await e2e.call("GET", "/api/v1/ping", { token: a.key })).status).to.equal(200);
    const channels = await e2e.admin("GET", `/admin/v1/organizations/${a.id}/channels`);
    expect(channels.body.items.find((c: { id: string }) => c.id === a.channelId).name).to.equal("Main");
    const webhooks = await e2e.admin("GET", `/admin/v1/organizations/${a.id}/webhooks`);
    expect(webhooks.body.items.find((w: { id: string }) => w.id === a.webhookId).active).to.equal(true);
    const contacts = await e2e.call("GET", "/api/v1/contacts", { token: a.key });
    expect(contacts.body.items.find((c: { id: string }) => c.id === a.contactId).isOptedOut).to.equal(true);
    const aJob = await e2e.call("GET", `/api/v1/templates/send/${a.jobId}`, { token: a.key });
    expect(aJob.body.status).to.equal("queued");
    const aTemplates = await e2e.admin("GET", `/admin/v1/organizations/${a.id}/templates`);
    expect(aTemplates.body.items.find((t: { id: string }) => t.id === a.templateId).status).to.equal("approved");
  });
});
