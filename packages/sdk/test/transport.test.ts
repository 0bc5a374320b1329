import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { ApiError, ConnectionError, MessagingClient, backoffDelay, parseRetryAfter, type RetryInfo } from "../src";

/**
 * The client's own behaviour (retries, keys, errors, pages) against a local HTTP server that answers
 * scripted replies; the same paths against the real stack are in test-e2e/test/sdk.e2e.test.ts.
 */
describe("sdk transport", () => {
  type Seen = { method: string; url: string; headers: IncomingMessage["headers"]; body: string };
  let server: Server;
  let baseUrl: string;
  let seen: Seen[];
  let handler: (req: IncomingMessage, res: ServerResponse, n: number) => void;

  before(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        handler(req, res, seen.length);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => (seen = []));

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
  const client = (extra: Partial<ConstructorParameters<typeof MessagingClient>[0]> = {}, retries: RetryInfo[] = []) =>
    new MessagingClient({ baseUrl, apiKey: "svc_test", retry: { baseDelayMs: 1, maxDelayMs: 2_000 }, onRetry: (i) => retries.push(i), ...extra });

  it("parses Retry-After as seconds or an HTTP date", () => {
    expect(parseRetryAfter("2")).to.equal(2000);
    expect(parseRetryAfter("0.5")).to.equal(500);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).to.equal(6_000);
    expect(parseRetryAfter(null)).to.equal(undefined);
    expect(parseRetryAfter("soon")).to.equal(undefined);
  });

  it("backs off exponentially with full jitter, capped, and never below Retry-After", () => {
    const opts = { baseDelayMs: 100, maxDelayMs: 1_000 };
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, undefined, opts, () => 0.999999))).to.deep.equal([99, 199, 399, 799, 999]);
    expect(backoffDelay(3, undefined, opts, () => 0)).to.equal(0);
    expect(backoffDelay(1, 700, opts, () => 0.5)).to.equal(700);
    expect(backoffDelay(9, 5_000, opts, () => 0.5)).to.equal(1_000);
  });

  it("retries a 503 after its Retry-After and then answers the 200", async () => {
    handler = (_req, res, n) => (n === 1 ? json(res, 503, { error: { code: "SERVICE_UNAVAILABLE", message: "down" } }, { "Retry-After": "1" }) : json(res, 200, { ok: true, organizationId: "org_1" }));
    const retries: RetryInfo[] = [];
    expect(await client({}, retries).ping()).to.deep.equal({ ok: true, organizationId: "org_1" });
    expect(seen).to.have.length(2);
    expect(retries).to.have.length(1);
    expect(retries[0]).to.include({ attempt: 1, status: 503, retryAfterMs: 1000 });
    expect(retries[0].delayMs).to.be.at.least(1000);
    expect(seen[0].headers.authorization).to.equal("Bearer svc_test");
  });

  it("gives up after maxRetries with the typed error, and does not wait for a Retry-After over maxDelayMs", async () => {
    handler = (_req, res) => json(res, 429, { error: { code: "RATE_LIMITED", message: "Too many requests" } }, { "Retry-After": "0", "X-Request-Id": "req_1" });
    const retries: RetryInfo[] = [];
    const err = await client({ retry: { maxRetries: 2, baseDelayMs: 1 } }, retries).ping().catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ApiError);
    expect(err).to.include({ status: 429, code: "RATE_LIMITED", message: "Too many requests", requestId: "req_1", retryAfterMs: 0 });
    expect(seen).to.have.length(3);
    expect(retries.map((r) => r.attempt)).to.deep.equal([1, 2]);

    seen = [];
    handler = (_req, res) => json(res, 429, { error: { code: "RATE_LIMITED", message: "Too many requests" } }, { "Retry-After": "60" });
    const long = await client().ping().catch((e: unknown) => e);
    expect(long).to.include({ code: "RATE_LIMITED", retryAfterMs: 60_000 });
    expect(seen).to.have.length(1);
  });

  it("does not retry other errors and carries code, message and details", async () => {
    const details = [{ path: "text", message: "Required" }];
    handler = (_req, res) => json(res, 400, { error: { code: "VALIDATION_ERROR", message: "Validation failed", details } });
    const err = await client().messages.send({ to: "+15550001111", text: "" }).catch((e: unknown) => e);
    expect(ApiError.is(err, "VALIDATION_ERROR")).to.equal(true);
    expect((err as ApiError).details).to.deep.equal(details);
    expect(seen).to.have.length(1);

    seen = [];
    handler = (_req, res) => {
      res.writeHead(502, { "Content-Type": "text/html" });
      res.end("<html>bad gateway</html>");
    };
    expect(await client().ping().catch((e: unknown) => e)).to.include({ status: 502, code: "UNKNOWN" });
  });

  it("sends an Idempotency-Key, reuses it after a dropped answer, and takes the caller's", async () => {
    handler = (req, res, n) => {
      if (n === 1) return req.socket.destroy();
      json(res, 200, { id: "msg_1", conversationId: "conv_1", contactId: "ct_1", providerMessageId: null }, { "Idempotent-Replayed": "true" });
    };
    const retries: RetryInfo[] = [];
    const answer = await client({}, retries).messages.sendWithAnswer({ to: "+15550001111", text: "hi" });
    expect(answer.replayed).to.equal(true);
    expect(seen).to.have.length(2);
    const key = seen[0].headers["idempotency-key"];
    expect(key).to.match(/^[0-9a-f-]{36}$/);
    expect(seen[1].headers["idempotency-key"]).to.equal(key);
    expect(answer.idempotencyKey).to.equal(key);
    expect(retries[0].error).to.not.equal(undefined);
    expect(JSON.parse(seen[1].body)).to.deep.equal({ to: "+15550001111", text: "hi" });

    seen = [];
    await client().templates.send({ templateId: "t", messagingChannelId: "ch", recipients: [{ phone: "+15550001111" }] }, { idempotencyKey: "mine-1" });
    expect(seen[0].headers["idempotency-key"]).to.equal("mine-1");
  });

  it("retries 409 IDEMPOTENCY_KEY_IN_USE of a keyed send until the first finished", async () => {
    handler = (_req, res, n) =>
      n === 1
        ? json(res, 409, { error: { code: "IDEMPOTENCY_KEY_IN_USE", message: "in progress" } })
        : json(res, 200, { id: "msg_1", conversationId: "c", contactId: "ct", providerMessageId: "wamid" });
    expect((await client().messages.send({ to: "+15550001111", text: "x" })).id).to.equal("msg_1");
    expect(seen.map((s) => s.headers["idempotency-key"])).to.satisfy((keys: string[]) => keys.length === 2 && keys[0] === keys[1]);
  });

  it("gives a ConnectionError when nothing answers", async () => {
    const dead = new MessagingClient({ baseUrl: "http://127.0.0.1:1", apiKey: "k", retry: { maxRetries: 1, baseDelayMs: 1 } });
    expect(await dead.ping().catch((e: unknown) => e)).to.be.instanceOf(ConnectionError);
  });

  it("walks every page with for await, passing limit and the cursors", async () => {
    handler = (req, res) => {
      const url = new URL(req.url!, baseUrl);
      const cursor = url.searchParams.get("cursor");
      if (!cursor) return json(res, 200, { items: [{ id: "a" }, { id: "b" }], nextCursor: "c1" });
      if (cursor === "c1") return json(res, 200, { items: [{ id: "c" }], nextCursor: "c2" });
      json(res, 200, { items: [] });
    };
    const ids: string[] = [];
    for await (const contact of client().contacts.list({ limit: 2 })) ids.push(contact.id);
    expect(ids).to.deep.equal(["a", "b", "c"]);
    expect(seen.map((s) => s.url)).to.deep.equal(["/api/v1/contacts?limit=2", "/api/v1/contacts?limit=2&cursor=c1", "/api/v1/contacts?limit=2&cursor=c2"]);
    seen = [];
    expect((await client().templates.list().toArray(1)).map((t) => t.id)).to.deep.equal(["a"]);
    expect(seen).to.have.length(1);
  });
});
