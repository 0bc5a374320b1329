/** Every console API route, for the role and cross-organization matrices. `:id` is replaced by a resource id. */
export interface ConsoleRoute {
  method: "get" | "post" | "patch" | "delete";
  path: string;
  body?: Record<string, unknown>;
  /** Which of the organization's ids goes into `:id`. */
  id?: "keyId" | "userId" | "invitationId" | "channelId" | "webhookId" | "templateId" | "jobId";
}

export const CONSOLE_WRITES: ConsoleRoute[] = [
  { method: "post", path: "/console/api/api-keys", body: { name: "k" } },
  { method: "delete", path: "/console/api/api-keys/:id", id: "keyId" },
  { method: "patch", path: "/console/api/organization", body: { rateLimit: { perSecond: 5, burst: 5 } } },
  { method: "post", path: "/console/api/invitations", body: { email: "new@example.com", role: "member" } },
  { method: "delete", path: "/console/api/invitations/:id", id: "invitationId" },
  { method: "patch", path: "/console/api/users/:id", id: "userId", body: { role: "owner" } },
  { method: "delete", path: "/console/api/users/:id", id: "userId" },
  { method: "post", path: "/console/api/channels", body: { name: "c", phoneNumber: "+15550100000", providerPhoneNumberId: "pn-x" } },
  { method: "patch", path: "/console/api/channels/:id", id: "channelId", body: { isDefault: true } },
  { method: "post", path: "/console/api/webhooks", body: { url: "https://example.com/h", events: ["message.received"] } },
  { method: "patch", path: "/console/api/webhooks/:id", id: "webhookId", body: { active: true } },
  { method: "delete", path: "/console/api/webhooks/:id", id: "webhookId" },
  { method: "post", path: "/console/api/webhooks/:id/test", id: "webhookId", body: {} },
  { method: "post", path: "/console/api/templates", body: { name: "t", language: "en", category: "UTILITY", body: "Hi" } },
  { method: "patch", path: "/console/api/templates/:id", id: "templateId", body: { status: "approved" } },
  { method: "post", path: "/console/api/template-jobs/:id/cancel", id: "jobId", body: {} },
  { method: "post", path: "/console/api/opt-outs", body: { messagingChannelId: "ch_x", phone: "+15550100001" } },
  { method: "post", path: "/console/api/opt-outs/actions", body: { action: "clear", messagingChannelId: "ch_x", phone: "+15550100001" } },
];

export const CONSOLE_READS: ConsoleRoute[] = [
  { method: "get", path: "/console/api/organization" },
  { method: "get", path: "/console/api/users" },
  { method: "get", path: "/console/api/invitations" },
  { method: "get", path: "/console/api/api-keys" },
  { method: "get", path: "/console/api/channels" },
  { method: "get", path: "/console/api/webhooks" },
  { method: "get", path: "/console/api/webhooks/:id/deliveries", id: "webhookId" },
  { method: "get", path: "/console/api/templates" },
  { method: "get", path: "/console/api/template-jobs" },
  { method: "get", path: "/console/api/template-jobs/:id", id: "jobId" },
  { method: "get", path: "/console/api/opt-outs?phone=%2B15550100001" },
  { method: "get", path: "/console/api/contacts" },
  { method: "get", path: "/console/api/conversations" },
  { method: "get", path: "/console/api/analytics?startDate=2026-01-01T00:00:00.000Z&endDate=2026-01-02T00:00:00.000Z" },
];
