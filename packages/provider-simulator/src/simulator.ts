import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import {
  digits,
  statusesBody,
  UNDELIVERABLE,
  unixSeconds,
  type MessageStatus,
  type StatusError,
  type TemplateEvent,
  type WebhookBody,
  type WebhookInboundMessage,
  type WebhookStatus,
} from "./payloads";
import { validateMessageBody } from "./validate";
import { WebhookSender } from "./webhook-sender";

export interface StatusDelaysMs {
  sent: number;
  delivered: number;
  read: number;
}

/**
 * Which sends a fault mode applies to: only those to `phoneNumberId` when it is given (others are answered `ok` and
 * do not count down `times`), so a test's fault reaches its own channel's sends, never another test's retry that
 * happens to reach the simulator meanwhile.
 */
export interface ModeScope {
  phoneNumberId?: string;
}

/** How the simulator answers `POST /:phoneNumberId/messages`; `times` then reverts to `ok` (default: forever). */
export type SimMode =
  | { kind: "ok" }
  | ({ kind: "error"; httpStatus: number; code: number; message?: string; times?: number } & ModeScope)
  | ({ kind: "slow"; delayMs: number; times?: number } & ModeScope)
  /** Accepts the message (its statuses follow) but answers 200 without `messages[0].id`: a 2xx nobody can read. */
  | ({ kind: "unreadable"; times?: number } & ModeScope)
  /** Accepts the message (its statuses follow) and closes the connection without an answer: an acceptance whose answer was lost. */
  | ({ kind: "dropped"; times?: number } & ModeScope)
  /**
   * Takes the message (its provider id is recorded at once) and holds the answer until `release()`: a test decides
   * what happens while a send is at the provider, whatever the machine's speed.
   */
  | ({ kind: "held"; times?: number } & ModeScope);

export interface SimLogEntry {
  level: "info" | "warn";
  msg: string;
  [field: string]: unknown;
}

export interface SimulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** The gateway's `/provider/webhooks` URL; without it no callback is posted. */
  webhookUrl?: string;
  appSecret?: string;
  accessToken?: string;
  statusDelaysMs?: Partial<StatusDelaysMs>;
  /** Post sent/delivered/read (or failed) callbacks after each accepted send. */
  autoStatuses?: boolean;
  /** The `entry[].id` of webhook bodies (the business account id). */
  templateAccountId?: string;
  /** Statuses due within one window are posted together. Default 20 ms. */
  batchWindowMs?: number;
  /** Most statuses in one webhook POST. Default 1000. */
  maxBatchSize?: number;
  /** Retries of a failed webhook POST. Default 5 (about 3 s in all). */
  webhookRetries?: number;
  /** Oldest recorded requests are dropped past this, so a long `npm start` does not grow forever. Default 10000. */
  maxRecordedRequests?: number;
  /**
   * Record only what a load test reads of each request (its `to` and `type`, no headers): a long run of recorded
   * bodies made the simulator's heap large, and its garbage collection paused it long enough to stamp the requests
   * that waited meanwhile with one time.
   */
  compactRecords?: boolean;
  /** Receives rare events (webhook delivery given up); nothing is logged per request. */
  onLog?: (entry: SimLogEntry) => void;
  /**
   * The clock status callbacks are scheduled and fall due by (epoch ms). Default `Date.now`.
   * Tests pass a manual clock to decide which statuses share a batch window, whatever the machine's speed.
   */
  now?: () => number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  phoneNumberId: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON, or the raw text when it did not parse. */
  body: unknown;
  /** Epoch milliseconds. */
  receivedAt: number;
  /** The HTTP status the simulator answered (0 until answered; -1 when `dropped` closed the connection instead). */
  responseStatus: number;
  /** The wamid given to an accepted message. */
  providerMessageId?: string;
  /** How long slow mode held the answer back (ms); absent when it was not delayed. */
  delayedMs?: number;
}

export interface InjectInboundInput {
  phoneNumberId: string;
  from: string;
  text?: string;
  button?: { text: string; payload: string };
  name?: string;
  id?: string;
  timestamp?: string | number;
}

export interface InjectStatusInput {
  phoneNumberId: string;
  providerMessageId: string;
  status: MessageStatus;
  recipientId: string;
  callbackData?: string;
  timestamp?: string | number;
  /** For `failed`; defaults to 131026 "Message undeliverable". */
  errors?: StatusError[];
}

export interface InjectTemplateStatusInput {
  templateAccountId?: string;
  providerTemplateId: string | number;
  name: string;
  language: string;
  event: TemplateEvent;
  reason?: string;
}

export interface Simulator {
  /** Base URL, e.g. `http://127.0.0.1:PORT`; the provider client's `baseUrl`. */
  readonly url: string;
  readonly port: number;
  /** Every `POST /:phoneNumberId/messages`, oldest first. Same array for the simulator's life. */
  readonly requests: RecordedRequest[];
  setMode(mode: SimMode): void;
  /** Answers every request the `held` mode is holding. */
  release(): void;
  /** Sends to this number succeed, but its status callbacks end in `failed`. */
  failNumber(phone: string): void;
  /** Posts a signed inbound message webhook; resolves with its provider message id once the gateway accepted it. */
  injectInbound(input: InjectInboundInput): Promise<string>;
  injectStatus(input: InjectStatusInput): Promise<void>;
  injectTemplateStatus(input: InjectTemplateStatusInput): Promise<void>;
  /** Posts any body to the webhook URL, no retry; `signature` overrides the header (null: none). Resolves with the HTTP status. */
  postRaw(body: unknown, options?: { signature?: string | null }): Promise<number>;
  setWebhookUrl(url: string | undefined): void;
  /** Resolves once every scheduled status callback has been posted (or given up). */
  idle(): Promise<void>;
  /** Clears recorded requests, the mode, the failing numbers and pending callbacks. */
  reset(): void;
  close(): Promise<void>;
}

interface PendingStatus {
  phoneNumberId: string;
  status: WebhookStatus;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const MAX_BODY_BYTES = 1024 * 1024;
// Optional Graph version prefix (`/v21.0/...`), so a baseUrl copied from the
// real provider works against the simulator unchanged.
const MESSAGES_PATH = /^\/(?:v\d+(?:\.\d+)?\/)?([^/]+)\/messages$/;

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, "body too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** The provider's (Graph API) error body. */
function graphError(message: string, code: number, type = "OAuthException", details?: string) {
  const error: Record<string, unknown> = { message, type, code, fbtrace_id: "sim" };
  if (details !== undefined) error.error_data = { messaging_product: "whatsapp", details };
  return { error };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function field<T extends "string" | "number" | "boolean" | "object">(
  body: Record<string, unknown>,
  key: string,
  type: T,
  required: boolean,
): void {
  const value = body[key];
  if (value === undefined || value === null) {
    if (required) throw new HttpError(400, `${key} is required`);
    return;
  }
  if (typeof value !== type) throw new HttpError(400, `${key} must be a ${type}`);
}

/** Checks the control API's bodies just enough to give a readable 400 instead of a crash. */
function parseMode(body: Record<string, unknown>): SimMode {
  if (body.kind !== "ok") field(body, "phoneNumberId", "string", false);
  switch (body.kind) {
    case "ok":
      return { kind: "ok" };
    case "error":
      field(body, "httpStatus", "number", true);
      field(body, "code", "number", true);
      field(body, "message", "string", false);
      field(body, "times", "number", false);
      return body as unknown as SimMode;
    case "unreadable":
    case "dropped":
      field(body, "times", "number", false);
      return body as unknown as SimMode;
    case "slow":
      field(body, "delayMs", "number", true);
      field(body, "times", "number", false);
      return body as unknown as SimMode;
    default:
      throw new HttpError(400, "kind must be ok, error, slow, unreadable or dropped");
  }
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const host = options.host ?? "127.0.0.1";
  const appSecret = options.appSecret ?? "dev-app-secret";
  const expectedAuthorization = `Bearer ${options.accessToken ?? "dev-provider-token"}`;
  const delays: StatusDelaysMs = { sent: 50, delivered: 150, read: 300, ...options.statusDelaysMs };
  const autoStatuses = options.autoStatuses ?? true;
  const templateAccountId = options.templateAccountId ?? "waba_sim";
  const windowMs = options.batchWindowMs ?? 20;
  const clock = options.now ?? Date.now;
  const maxBatchSize = options.maxBatchSize ?? 1000;
  const maxRecorded = options.maxRecordedRequests ?? 10_000;
  const compact = options.compactRecords === true;
  const log = options.onLog ?? (() => undefined);
  const sender = new WebhookSender(appSecret, options.webhookRetries ?? 5);

  let webhookUrl = options.webhookUrl;
  let mode: SimMode = { kind: "ok" };
  let closed = false;
  const failing = new Set<string>();
  const held = new Set<() => void>();
  const requests: RecordedRequest[] = [];
  const closing = new AbortController();

  // Provider message ids: a random per-instance prefix and a counter, unique
  // across simulators and cheaper than random bytes per message.
  const idPrefix = randomBytes(6).toString("hex").toUpperCase();
  let seq = 0;
  const nextWamid = () => `wamid.SIM${idPrefix}${(++seq).toString(36).toUpperCase().padStart(8, "0")}`;

  // ---- status callbacks --------------------------------------------------
  // Statuses wait in buckets of one batch window each. A timer runs only while
  // some are waiting; each tick moves every due bucket to `outgoing`, and one
  // sender posts `outgoing` in order, one POST at a time. So a message's
  // statuses arrive in order even across retries, and while a POST is in
  // flight the next batch simply grows instead of opening more requests.
  const buckets = new Map<number, PendingStatus[]>();
  const outgoing: PendingStatus[] = [];
  let ticker: NodeJS.Timeout | undefined;
  let pumping = false;

  function schedule(dueAt: number, item: PendingStatus): void {
    const key = Math.ceil(dueAt / windowMs);
    let bucket = buckets.get(key);
    if (!bucket) buckets.set(key, (bucket = []));
    bucket.push(item);
    if (!ticker) ticker = setInterval(tick, windowMs);
  }

  function tick(): void {
    const nowKey = Math.floor(clock() / windowMs);
    for (const key of [...buckets.keys()].sort((a, b) => a - b)) {
      if (key > nowKey) break;
      outgoing.push(...(buckets.get(key) ?? []));
      buckets.delete(key);
    }
    if (buckets.size === 0 && ticker) {
      clearInterval(ticker);
      ticker = undefined;
    }
    if (outgoing.length > 0) void pump();
  }

  async function pump(): Promise<void> {
    if (pumping) return;
    pumping = true;
    try {
      while (outgoing.length > 0 && !closed) {
        const batch = outgoing.splice(0, maxBatchSize);
        const url = webhookUrl;
        if (!url) continue;
        const result = await sender.send(url, statusesBody(templateAccountId, batch));
        if (!result.delivered && !closed) {
          log({ level: "warn", msg: "status callback delivery given up", statuses: batch.length, httpStatus: result.status, attempts: result.attempts });
        }
      }
    } finally {
      pumping = false;
    }
  }

  function scheduleAutoStatuses(phoneNumberId: string, wamid: string, to: string, callbackData: unknown): void {
    const now = clock();
    const base = (status: MessageStatus, at: number): WebhookStatus => {
      const s: WebhookStatus = { id: wamid, status, timestamp: unixSeconds(at), recipient_id: to };
      if (typeof callbackData === "string") s.biz_opaque_callback_data = callbackData;
      return s;
    };
    const sentAt = now + delays.sent;
    schedule(sentAt, { phoneNumberId, status: base("sent", sentAt) });
    const secondAt = now + delays.delivered;
    if (failing.has(to)) {
      const failed = base("failed", secondAt);
      failed.errors = [UNDELIVERABLE];
      schedule(secondAt, { phoneNumberId, status: failed });
      return;
    }
    schedule(secondAt, { phoneNumberId, status: base("delivered", secondAt) });
    const readAt = now + delays.read;
    schedule(readAt, { phoneNumberId, status: base("read", readAt) });
  }

  async function deliverNow(body: WebhookBody): Promise<void> {
    if (!webhookUrl) throw new Error("provider simulator: webhookUrl is not set");
    const result = await sender.send(webhookUrl, body);
    if (!result.delivered) {
      throw new Error(`provider simulator: webhook not accepted (HTTP ${result.status ?? "no answer"} after ${result.attempts} attempts)`);
    }
  }

  // ---- the provider API ----------------------------------------------------
  function record(entry: RecordedRequest): void {
    // Drop the oldest tenth at once: one splice per many requests instead of
    // an O(n) shift on every request past the cap.
    if (requests.length >= maxRecorded) requests.splice(0, Math.max(1, Math.floor(maxRecorded / 10)));
    requests.push(entry);
  }

  /** Takes the current mode for one request to `phoneNumberId`, counting down `times`; `ok` for a send outside its scope. */
  function takeMode(phoneNumberId: string): SimMode {
    const current = mode;
    if (current.kind !== "ok" && current.phoneNumberId !== undefined && current.phoneNumberId !== phoneNumberId) return { kind: "ok" };
    if (current.kind !== "ok" && current.times !== undefined) {
      const left = current.times - 1;
      mode = left <= 0 ? { kind: "ok" } : { ...current, times: left };
    }
    return current;
  }

  async function handleMessages(req: IncomingMessage, res: ServerResponse, path: string, phoneNumberId: string): Promise<void> {
    // Stamped when the request's head is read, before its body: the time the request reached the provider.
    const receivedAt = Date.now();
    const raw = await readBody(req);
    let body: unknown;
    let parsed = true;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      body = raw.toString("utf8");
      parsed = false;
    }
    const b = body as { to?: unknown; type?: unknown } | undefined;
    const entry: RecordedRequest = {
      method: "POST",
      path,
      phoneNumberId,
      headers: compact ? {} : req.headers,
      body: compact && b && typeof b === "object" ? { to: b.to, type: b.type } : body,
      receivedAt,
      responseStatus: 0,
    };
    record(entry);
    const answer = (status: number, payload: unknown) => {
      entry.responseStatus = status;
      sendJson(res, status, payload);
    };

    if (req.headers.authorization !== expectedAuthorization) {
      return answer(401, graphError("Invalid OAuth access token - Cannot parse access token", 190));
    }
    const current = takeMode(phoneNumberId);
    let wamid: string | undefined;
    if (current.kind === "held") {
      wamid = entry.providerMessageId = nextWamid();
      await new Promise<void>((resolve) => held.add(resolve));
      if (closed) return;
    }
    if (current.kind === "error") {
      return answer(current.httpStatus, graphError(current.message ?? `Simulated error ${current.code}`, current.code));
    }
    if (current.kind === "slow") {
      entry.delayedMs = current.delayMs;
      try {
        await sleep(current.delayMs, undefined, { signal: closing.signal });
      } catch {
        return; // closing: the socket is being destroyed
      }
    }
    if (!parsed) return answer(400, graphError("(#100) Invalid parameter", 100, "OAuthException", "body is not JSON"));
    const problem = validateMessageBody(body);
    if (problem !== null || !isRecord(body)) {
      return answer(400, graphError("(#100) Invalid parameter", 100, "OAuthException", problem ?? "invalid body"));
    }

    const to = digits(body.to as string);
    wamid ??= nextWamid();
    entry.providerMessageId = wamid;
    if (current.kind === "dropped") {
      entry.responseStatus = -1;
      req.socket.destroy();
    } else answer(200, current.kind === "unreadable" ? { messaging_product: "whatsapp" } : { messaging_product: "whatsapp", contacts: [{ input: body.to, wa_id: to }], messages: [{ id: wamid }] });
    if (autoStatuses && webhookUrl && !closed) scheduleAutoStatuses(phoneNumberId, wamid, to, body.biz_opaque_callback_data);
  }

  // ---- the control API (/_sim/*) -------------------------------------------
  async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
    const raw = await readBody(req);
    if (raw.length === 0) return {};
    let body: unknown;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      throw new HttpError(400, "body is not JSON");
    }
    if (!isRecord(body)) throw new HttpError(400, "body must be a JSON object");
    return body;
  }

  async function handleControl(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const route = `${req.method ?? "GET"} ${path}`;
    if (route === "GET /_sim/requests") return sendJson(res, 200, { requests });
    if (req.method !== "POST") throw new HttpError(404, `no route ${route}`);
    const body = await readJsonObject(req);
    switch (path) {
      case "/_sim/mode":
        sim.setMode(parseMode(body));
        return sendJson(res, 200, { mode });
      case "/_sim/fail-numbers": {
        const numbers = body.numbers;
        if (!Array.isArray(numbers) || !numbers.every((n): n is string => typeof n === "string")) {
          throw new HttpError(400, "numbers must be an array of strings");
        }
        numbers.forEach((n) => sim.failNumber(n));
        return sendJson(res, 200, { failing: [...failing] });
      }
      case "/_sim/inbound": {
        field(body, "phoneNumberId", "string", true);
        field(body, "from", "string", true);
        field(body, "text", "string", false);
        field(body, "button", "object", false);
        field(body, "name", "string", false);
        field(body, "id", "string", false);
        const id = await sim.injectInbound(body as unknown as InjectInboundInput);
        return sendJson(res, 200, { id });
      }
      case "/_sim/status":
        for (const key of ["phoneNumberId", "providerMessageId", "status", "recipientId"]) field(body, key, "string", true);
        field(body, "callbackData", "string", false);
        await sim.injectStatus(body as unknown as InjectStatusInput);
        return sendJson(res, 200, { ok: true });
      case "/_sim/template-status":
        for (const key of ["name", "language", "event"]) field(body, key, "string", true);
        if (typeof body.providerTemplateId !== "string" && typeof body.providerTemplateId !== "number") {
          throw new HttpError(400, "providerTemplateId must be a string or a number");
        }
        await sim.injectTemplateStatus(body as unknown as InjectTemplateStatusInput);
        return sendJson(res, 200, { ok: true });
      case "/_sim/raw": {
        if (body.signature !== undefined && body.signature !== null && typeof body.signature !== "string") {
          throw new HttpError(400, "signature must be a string or null");
        }
        const status = await sim.postRaw(body.body, { signature: body.signature as string | null | undefined });
        return sendJson(res, 200, { status });
      }
      case "/_sim/webhook-url":
        field(body, "url", "string", false);
        sim.setWebhookUrl(body.url as string | undefined);
        return sendJson(res, 200, { webhookUrl: webhookUrl ?? null });
      case "/_sim/reset":
        sim.reset();
        return sendJson(res, 200, { ok: true });
      default:
        throw new HttpError(404, `no route ${route}`);
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    try {
      if (req.method === "POST") {
        const match = MESSAGES_PATH.exec(path);
        if (match) return await handleMessages(req, res, path, decodeURIComponent(match[1]));
      }
      if (path.startsWith("/_sim/")) return await handleControl(req, res, path);
      if (path === "/healthz") return sendJson(res, 200, { ok: true });
      sendJson(res, 404, graphError(`Unknown path components: ${path}`, 2500));
    } catch (error) {
      if (error instanceof HttpError) return sendJson(res, error.status, { error: { message: error.message } });
      sendJson(res, 500, { error: { message: error instanceof Error ? error.message : String(error) } });
    }
  }

  const server: Server = createServer((req, res) => void handle(req, res));
  // Longer than the provider client's keep-alive, so the server never closes
  // a socket the client is about to reuse.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;

  const sim: Simulator = {
    url: `http://${urlHost}:${port}`,
    port,
    requests,
    setMode(next) {
      mode = next.kind === "ok" ? { kind: "ok" } : { ...next };
    },
    release() {
      for (const answer of held) answer();
      held.clear();
    },
    failNumber(phone) {
      failing.add(digits(phone));
    },
    async injectInbound(input) {
      const from = digits(input.from);
      const id = input.id ?? nextWamid();
      const timestamp = input.timestamp !== undefined ? String(input.timestamp) : unixSeconds();
      let message: WebhookInboundMessage;
      if (input.button) message = { from, id, timestamp, type: "button", button: { text: input.button.text, payload: input.button.payload } };
      else if (input.text !== undefined) message = { from, id, timestamp, type: "text", text: { body: input.text } };
      else throw new Error("provider simulator: injectInbound needs text or button");
      await deliverNow({
        object: "whatsapp_business_account",
        entry: [
          {
            id: templateAccountId,
            changes: [
              {
                field: "messages",
                value: {
                  metadata: { phone_number_id: input.phoneNumberId },
                  contacts: [{ profile: { name: input.name ?? "Sim User" }, wa_id: from }],
                  messages: [message],
                },
              },
            ],
          },
        ],
      });
      return id;
    },
    async injectStatus(input) {
      const status: WebhookStatus = {
        id: input.providerMessageId,
        status: input.status,
        timestamp: input.timestamp !== undefined ? String(input.timestamp) : unixSeconds(),
        recipient_id: digits(input.recipientId),
      };
      if (input.callbackData !== undefined) status.biz_opaque_callback_data = input.callbackData;
      if (input.status === "failed") status.errors = input.errors ?? [UNDELIVERABLE];
      await deliverNow(statusesBody(templateAccountId, [{ phoneNumberId: input.phoneNumberId, status }]));
    },
    async injectTemplateStatus(input) {
      // The provider sends numeric template ids; keep a numeric string numeric.
      const templateId = /^\d+$/.test(String(input.providerTemplateId)) ? Number(input.providerTemplateId) : input.providerTemplateId;
      const value: Extract<WebhookBody["entry"][number]["changes"][number], { field: "message_template_status_update" }>["value"] = {
        event: input.event,
        message_template_id: templateId,
        message_template_name: input.name,
        message_template_language: input.language,
      };
      if (input.reason !== undefined) value.reason = input.reason;
      await deliverNow({
        object: "whatsapp_business_account",
        entry: [{ id: input.templateAccountId ?? templateAccountId, changes: [{ field: "message_template_status_update", value }] }],
      });
    },
    async postRaw(body, opts = {}) {
      if (!webhookUrl) throw new Error("provider simulator: webhookUrl is not set");
      const raw = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
      const status = await sender.postOnce(webhookUrl, raw, opts.signature);
      if (status === null) throw new Error("provider simulator: no answer from the webhook URL");
      return status;
    },
    setWebhookUrl(url) {
      webhookUrl = url;
    },
    async idle() {
      while (!closed && (buckets.size > 0 || outgoing.length > 0 || pumping)) await sleep(10);
    },
    reset() {
      requests.length = 0;
      mode = { kind: "ok" };
      sim.release();
      failing.clear();
      buckets.clear();
      outgoing.length = 0;
    },
    async close() {
      if (closed) return;
      closed = true;
      closing.abort();
      sim.release();
      if (ticker) clearInterval(ticker);
      ticker = undefined;
      buckets.clear();
      outgoing.length = 0;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await Promise.all([stopped, sender.close()]);
    },
  };
  return sim;
}
