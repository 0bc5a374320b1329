/**
 * The console's only way to the server: `/console/api/*` on the page's own origin. The session cookie is HttpOnly
 * (the browser sends it); the CSRF token from sign-in goes back in `X-CSRF-Token` on every state change (ADR 0009).
 * Failures keep the contract's error envelope: `code`, `message` and `details` (field paths) for the forms.
 */

// Types only (erased at build: no zod in the bundle), from the one source of truth, packages/contracts.
import type { z } from "zod";
import type * as C from "@platform/contracts";

export type Role = C.ConsoleRole;
export type User = C.ConsoleUser;
export type Session = z.infer<typeof C.ConsoleSession>;

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

/**
 * The spec's event types a webhook may subscribe to (`webhook.test` is never subscribed to). Written here rather than
 * imported (a value import would bundle zod); the type below fails to compile if it misses or adds one.
 */
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
] as const satisfies readonly C.SubscribableEventType[];
type Missing = Exclude<C.SubscribableEventType, (typeof SUBSCRIBABLE_EVENTS)[number]>;
const everyEvent: [Missing] extends [never] ? true : Missing = true;
void everyEvent;

export const TEMPLATE_STATUSES = ["pending", "approved", "rejected", "paused", "disabled"] as const satisfies readonly C.TemplateStatus[];
export const FINAL_JOB_STATES: string[] = ["completed", "cancelled", "failed"] satisfies C.TemplateJobStatus[];

export type Organization = C.Organization;
export type Channel = C.Channel;
export type ApiKey = z.infer<typeof C.ApiKeySummary>;
export type CreatedApiKey = z.infer<typeof C.CreatedApiKey>;
export type Webhook = z.infer<typeof C.Webhook>;
export type CreatedWebhook = z.infer<typeof C.CreatedWebhook>;
export type WebhookTestResult = z.infer<typeof C.WebhookTestResult>;
export type Delivery = z.infer<typeof C.WebhookDelivery>;
export type Template = C.Template;
export type TemplateJob = C.TemplateJob;
export type TemplateJobList = C.TemplateJobList;
export type OptOutEntry = C.OptOutEntry;
export type OptOutLookup = C.OptOutLookup;
export type Conversation = C.Conversation;
export type Analytics = z.infer<typeof C.AnalyticsResult>;
export type PendingInvitation = z.infer<typeof C.PendingInvitation>;
export type CreatedInvitation = z.infer<typeof C.CreatedInvitation>;
