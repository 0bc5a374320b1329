/**
 * The OpenAPI 3.1 document of `/api/v1`, generated from the same zod schemas
 * that validate requests. Each operation lands here with the service that
 * serves it; nothing is written by hand.
 */
import { OpenAPIRegistry, OpenApiGeneratorV31, type RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import {
  ContactList,
  ConversationList,
  MessageRecord,
  MessageResponse,
  OptOutRequest,
  OptOutState,
  PingResponse,
  SendMessageRequest,
} from "./api";
import { AnalyticsQuery, AnalyticsResult } from "./analytics";
import { PageQuery } from "./common";
import { TemplateJob, TemplateList, TemplateSendJobRequest } from "./templates";
import { ErrorEnvelope, statusForCode, type ErrorCode } from "./errors";

const DESCRIPTIONS: Record<number, string> = {
  400: "Validation failed, malformed body, invalid query parameters, or upstream rejection",
  401: "API key missing or invalid (`UNAUTHORIZED`)",
  402: "The organization's plan does not cover the action (`PAYMENT_REQUIRED`)",
  403: "Forbidden",
  404: "Not found",
  409: "Conflict",
  413: "Request over the size limit: the body (16 MB for `/templates/send`, 1 MB elsewhere), or the request line and headers (16 KB) (`PAYLOAD_TOO_LARGE`)",
  422: "Idempotency key reused with a different body, or on the other keyed endpoint",
  429: "Rate limited (`RATE_LIMITED`); see `Retry-After`",
  503: "A dependency is down; safe to retry",
};

/**
 * Codes any request can get, whatever its operation: a request that is not readable (not HTTP/1.1, an `Expect` other
 * than `100-continue`, not received in time), a body that is not JSON (on any method, GET included), a request over the
 * size limits, no key, the rate limit, a dependency down.
 */
const EVERY_OPERATION: ErrorCode[] = ["VALIDATION_ERROR", "INVALID_JSON", "PAYLOAD_TOO_LARGE", "UNAUTHORIZED", "RATE_LIMITED", "SERVICE_UNAVAILABLE"];

/** The error answers of an operation: its own codes, and those of EVERY_OPERATION. */
function errors(codes: ErrorCode[]): RouteConfig["responses"] {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of [...codes, ...EVERY_OPERATION]) {
    const status = statusForCode(code);
    byStatus.set(status, [...new Set([...(byStatus.get(status) ?? []), code])]);
  }
  const out: RouteConfig["responses"] = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = {
      description: `${DESCRIPTIONS[status] ?? "Error"}. Codes: ${list.map((c) => `\`${c}\``).join(", ")}`,
      content: { "application/json": { schema: ErrorEnvelope } },
    };
  }
  return out;
}

const json = (schema: z.ZodType, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

const idempotencyHeader = z.object({
  "Idempotency-Key": z
    .string()
    .min(1)
    .max(255)
    .optional()
    .meta({
      description:
        "repeat with the same key and body within 24 h returns the first answer, status included (`Idempotent-Replayed: true`), whatever the organization's plan is now (a first 402 included); the key is the organization's: another body, or the other keyed endpoint, is 422 `IDEMPOTENCY_KEY_REUSED`",
    }),
});

export function buildOpenApiDocument(opts: { serverUrl?: string } = {}) {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "API key of an organization (`svc_…`), created in Settings → API keys",
  });
  const security = [{ bearerAuth: [] }];

  registry.registerPath({
    operationId: "ping",
    method: "get",
    path: "/api/v1/ping",
    summary: "Check that an API key works",
    tags: ["Auth"],
    security,
    responses: { 200: json(PingResponse, "Authenticated"), ...errors([]) },
  });

  registry.registerPath({
    operationId: "sendMessage",
    method: "post",
    path: "/api/v1/messages",
    summary: "Send a text message",
    description:
      "Stores the message and hands it to the provider. Outside the 24-hour service window an approved template must be used instead. " +
      "When the provider is slow or failing transiently the answer is 200 with `providerMessageId: null` and the send is retried in the background. " +
      "A send without an `Idempotency-Key` whose caller gets no answer (it leaves, or is answered 503 because the service stalled or died) before the send reaches the provider is not sent: send it again. " +
      "With a key, a retry answers the first request's message, so a message is sent once whatever the network did.",
    tags: ["Messages"],
    security,
    request: { headers: idempotencyHeader, body: { content: { "application/json": { schema: SendMessageRequest } }, required: true } },
    responses: {
      200: json(MessageResponse, "Message accepted and stored"),
      ...errors([
        "VALIDATION_ERROR",
        "INVALID_JSON",
        "OUTSIDE_SERVICE_WINDOW",
        "UPSTREAM_REJECTED",
        "PAYMENT_REQUIRED",
        "CONTACT_OPTED_OUT",
        "PROVIDER_NOT_CONNECTED",
        "CHANNEL_NOT_FOUND",
        "IDEMPOTENCY_KEY_IN_USE",
        "PAYLOAD_TOO_LARGE",
        "IDEMPOTENCY_KEY_REUSED",
      ]),
    },
  });

  registry.registerPath({
    operationId: "getMessage",
    method: "get",
    path: "/api/v1/messages/{messageId}",
    summary: "A stored message, inbound or outbound",
    description:
      "The full record of a message: what a webhook whose body was over 256 KB left out (its `data` has `summarized: true` and names the fields in `omitted`).",
    tags: ["Messages"],
    security,
    request: { params: z.object({ messageId: z.string().min(1).meta({ example: "msg_01jd0000000000000000000000", description: "an id the organization does not have, whatever its form, is 404" }) }) },
    responses: { 200: json(MessageRecord, "The message"), ...errors(["VALIDATION_ERROR", "NOT_FOUND"]) },
  });

  registry.registerPath({
    operationId: "listConversations",
    method: "get",
    path: "/api/v1/conversations",
    summary: "List conversations",
    tags: ["Conversations"],
    security,
    request: { query: PageQuery },
    responses: { 200: json(ConversationList, "A page of conversations"), ...errors(["VALIDATION_ERROR", "INVALID_CURSOR"]) },
  });

  registry.registerPath({
    operationId: "listContacts",
    method: "get",
    path: "/api/v1/contacts",
    summary: "List contacts",
    description: "Ordered by `createdAt`, then `id`, ascending. Cursors are opaque and stable while contacts are inserted.",
    tags: ["Contacts"],
    security,
    request: { query: PageQuery },
    responses: { 200: json(ContactList, "A page of contacts"), ...errors(["VALIDATION_ERROR", "INVALID_CURSOR"]) },
  });

  registry.registerPath({
    operationId: "setOptOut",
    method: "post",
    path: "/api/v1/opt-outs",
    summary: "Set or clear a per-channel opt-out",
    description: "`set` creates or reactivates the opt-out of (channel, phone); `clear` revokes it and is idempotent.",
    tags: ["Opt-outs"],
    security,
    request: { body: { content: { "application/json": { schema: OptOutRequest } }, required: true } },
    responses: {
      200: json(OptOutState, "Current opt-out state"),
      ...errors(["VALIDATION_ERROR", "INVALID_JSON", "PAYMENT_REQUIRED", "CHANNEL_NOT_FOUND", "PAYLOAD_TOO_LARGE"]),
    },
  });

  registry.registerPath({
    operationId: "getAnalytics",
    method: "get",
    path: "/api/v1/analytics",
    summary: "Outbound message counts and rates for a date range",
    description:
      "Counts the outbound messages (text and template) whose `createdAt` lies in `[startDate, endDate]` (inclusive, to the millisecond), " +
      "each by its current status. A date-only `endDate` means the end of that day (UTC). Available on every plan.",
    tags: ["Analytics"],
    security,
    request: { query: AnalyticsQuery },
    responses: { 200: json(AnalyticsResult, "Counts and rates of the period"), ...errors(["VALIDATION_ERROR"]) },
  });

  registry.registerPath({
    operationId: "listTemplates",
    method: "get",
    path: "/api/v1/templates",
    summary: "List templates",
    description: "Ordered by `createdAt`, then `id`, ascending.",
    tags: ["Templates"],
    security,
    request: { query: PageQuery },
    responses: { 200: json(TemplateList, "A page of templates"), ...errors(["VALIDATION_ERROR", "INVALID_CURSOR"]) },
  });

  registry.registerPath({
    operationId: "sendTemplate",
    method: "post",
    path: "/api/v1/templates/send",
    summary: "Queue a bulk template send job",
    description:
      "Queues a job that sends an approved template to 1 to 50,000 recipients, paced by the server (the channel's `messagesPerSecond` " +
      "and `throttlePerHour`), optionally at `scheduledAt`. Each recipient's `bodyParameters` count must equal the template's. " +
      "Opted-out recipients are skipped. Bodies up to 16 MB.",
    tags: ["Templates"],
    security,
    request: { headers: idempotencyHeader, body: { content: { "application/json": { schema: TemplateSendJobRequest } }, required: true } },
    responses: {
      200: json(TemplateJob, "Job created"),
      ...errors([
        "VALIDATION_ERROR",
        "INVALID_JSON",
        "PAYMENT_REQUIRED",
        "TEMPLATE_NOT_APPROVED",
        "PROVIDER_NOT_CONNECTED",
        "CHANNEL_NOT_FOUND",
        "TEMPLATE_NOT_FOUND",
        "IDEMPOTENCY_KEY_IN_USE",
        "PAYLOAD_TOO_LARGE",
        "IDEMPOTENCY_KEY_REUSED",
      ]),
    },
  });

  const jobId = z.object({ jobId: z.string().min(1).meta({ example: "job_01jd0000000000000000000000", description: "an id the organization does not have, whatever its form, is 404" }) });
  registry.registerPath({
    operationId: "getTemplateSendJob",
    method: "get",
    path: "/api/v1/templates/send/{jobId}",
    summary: "A template send job with its progress",
    tags: ["Templates"],
    security,
    request: { params: jobId },
    // A job id that is not one (a NUL, a broken percent-encoding) is VALIDATION_ERROR.
    responses: { 200: json(TemplateJob, "The job"), ...errors(["VALIDATION_ERROR", "NOT_FOUND"]) },
  });

  registry.registerPath({
    operationId: "cancelTemplateSendJob",
    method: "post",
    path: "/api/v1/templates/send/{jobId}/cancel",
    summary: "Cancel a template send job",
    description:
      "Stops the job (`cancelled`). The answer comes once the job has stopped (until then it reads `running` or `paused`): no send of the job reaches the provider after it, and `sent`, `failed` and `skipped` are final, but for two cases: a provider call that timed out and that the provider had accepted after all is counted `sent` when its status arrives, and after a crash of the service running the job the sends it had not recorded are counted when its lease runs out (at most 30 s). A job already completed, cancelled or failed is answered unchanged.",
    tags: ["Templates"],
    security,
    request: { params: jobId },
    // No body is needed; one that is sent is read like any other (invalid JSON, over 1 MB).
    responses: { 200: json(TemplateJob, "The job"), ...errors(["VALIDATION_ERROR", "INVALID_JSON", "NOT_FOUND", "PAYMENT_REQUIRED", "PAYLOAD_TOO_LARGE"]) },
  });

  const generator = new OpenApiGeneratorV31(registry.definitions);
  return generator.generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Business Messaging API",
      version: "1.0.0",
      description: "Send and receive chat messages, manage contacts and per-channel opt-outs. Errors use `{error: {code, message, details?}}`.",
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    },
    servers: [{ url: opts.serverUrl ?? "/" }],
    security,
    tags: [
      { name: "Auth", description: "API keys" },
      { name: "Messages", description: "Outbound text messages" },
      { name: "Conversations", description: "Conversations with contacts" },
      { name: "Contacts", description: "Contacts of the organization" },
      { name: "Opt-outs", description: "Per-channel opt-outs" },
      { name: "Analytics", description: "Outbound message analytics" },
      { name: "Templates", description: "Approved templates and bulk template send jobs" },
    ],
  });
}
