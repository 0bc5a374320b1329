/**
 * The console's only way to the server: `/console/api/*` on the page's own origin. The session cookie is HttpOnly
 * (the browser sends it); the CSRF token from sign-in goes back in `X-CSRF-Token` on every state change (ADR 0009).
 * Failures keep the contract's error envelope: `code`, `message` and `details` (field paths) for the forms.
 */

export type Role = "owner" | "admin" | "member";

export interface User {
  id: string;
  organizationId: string;
  email: string;
  role: Role;
  createdAt: string;
}

export interface Session {
  user: User;
  csrfToken: string;
  expiresAt: string;
}

export interface ErrorDetail {
  path: string;
  message: string;
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[] = [],
  ) {
    super(message);
  }
}

export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

let csrfToken: string | undefined;
let onSignedOut: (() => void) | undefined;

export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

/** Called when a request answers 401 (the session expired or was removed). */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let res: Response;
  try {
    res = await fetch(`/console/api${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch {
    throw new ApiFailure(0, "NETWORK_ERROR", "The server could not be reached");
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const error = (json as { error?: { code?: string; message?: string; details?: ErrorDetail[] } } | undefined)?.error;
    const failure = new ApiFailure(res.status, error?.code ?? `HTTP_${res.status}`, error?.message ?? `The server answered ${res.status}`, error?.details ?? []);
    if (res.status === 401 && path !== "/session") onSignedOut?.();
    throw failure;
  }
  return json as T;
}

export const get = <T>(path: string) => api<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => api<T>("POST", path, body);
export const patch = <T>(path: string, body: unknown) => api<T>("PATCH", path, body);
export const del = (path: string) => api<void>("DELETE", path);

/** The spec's event types a webhook may subscribe to (`webhook.test` is never subscribed to). */
export const SUBSCRIBABLE_EVENTS = [
  "message.received",
  "message.sent",
  "message.delivered",
  "message.read",
  "message.failed",
  "conversation.opened",
  "conversation.closed",
  "optout.created",
  "template.status_updated",
] as const;

export const TEMPLATE_STATUSES = ["pending", "approved", "rejected", "paused", "disabled"] as const;
export const FINAL_JOB_STATES = ["completed", "cancelled", "failed"];

export interface Organization {
  id: string;
  name: string;
  plan: string;
  rateLimit: { perSecond: number; burst: number };
  optOutKeywords: string[];
}
export interface Channel {
  id: string;
  name: string;
  phoneNumber: string;
  providerPhoneNumberId: string;
  connected: boolean;
  isDefault: boolean;
  messagesPerSecond: number;
  createdAt: string;
}
export interface ApiKey {
  id: string;
  name: string;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}
export interface Webhook {
  id: string;
  url: string;
  events: string[];
  active: boolean;
  consecutiveFailures: number;
  deactivatedAt: string | null;
  createdAt: string;
}
export interface Delivery {
  id: string;
  eventId: string;
  event: string;
  attempt: number;
  createdAt: string;
  responseStatus: number | null;
  responseBody: string | null;
  error: string | null;
  durationMs: number | null;
}
export interface Template {
  id: string;
  name: string;
  language: string;
  category: string | null;
  status: string;
  bodyParameterCount: number;
  providerTemplateId: string;
  templateAccountId: string;
  createdAt: string;
}
export interface TemplateJob {
  id: string;
  status: string;
  templateId: string | null;
  messagingChannelId: string;
  scheduledFor: string | null;
  throttlePerHour: number | null;
  recipients: number;
  sent: number;
  failed: number;
  skipped: number;
  startedAt: string | null;
  completedAt: string | null;
  createdAt: string;
}
export interface OptOutEntry {
  optOutId: string;
  messagingChannelId: string;
  phone: string;
  active: boolean;
  source: string;
  keyword: string | null;
  reason: string | null;
  createdAt: string;
  revokedAt: string | null;
}
export interface Conversation {
  id: string;
  contactId: string;
  messagingChannelId: string;
  phone: string;
  status: string;
  openedAt: string;
  closedAt: string | null;
  lastMessageAt: string;
}
export interface Analytics {
  period: { start: string; end: string };
  outboundMessages: {
    total: number;
    counts: Record<string, number>;
    deliveryRate: number;
    readRate: number;
    failureRate: number;
  };
}
export interface PendingInvitation {
  id: string;
  email: string;
  role: Role;
  createdAt: string;
  expiresAt: string;
}
