import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { expect } from "chai";
import express from "express";
import request from "supertest";
import { z } from "zod";
import { createLogger } from "@platform/logging";
import { ApiError, createMetrics, createServiceHandler, createServiceListener, headerOf, isDependencyDown, organizationFrom, parseBody, type JsonRoute } from "../src";

/** Sends bytes as they are: superagent would JSON-serialize a Buffer sent with a JSON content type. */
const raw = (bytes: Buffer) => bytes as unknown as string;

const log = createLogger("json-routes-test", "silent");
const TOKEN = "internal-token-123456";
const internal = { "x-internal-token": TOKEN, "x-organization-id": "org_1" };

const thing: JsonRoute = {
  method: "POST",
  path: "/api/v1/things",
  async handler(req) {
    const body = parseBody(z.object({ name: z.string().min(1) }), req);
    if (body.name === "boom") throw new Error("secret internals");
    if (body.name === "limited") throw new ApiError("RATE_LIMITED", "slow down", undefined, { "Retry-After": "3" });
    return { status: 201, body: { name: body.name, org: organizationFrom(req), key: headerOf(req, "Idempotency-Key") ?? null }, headers: { "Idempotent-Replayed": "true" } };
  },
};

function handler(opts: { bodyLimit?: string } = {}) {
  return createServiceHandler({ service: "t", log, internalToken: TOKEN, readiness: {}, routes: express.Router(), jsonRoutes: [thing], bodyLimit: opts.bodyLimit });
}

/** The fast path in front of an app that only counts what reaches it. */
function countingListener() {
  const reached: string[] = [];
  const app = (req: IncomingMessage, res: ServerResponse) => {
    reached.push(`${req.method} ${req.url}`);
    res.writeHead(418).end();
  };
  const listener = createServiceListener({ app, routes: [thing], internalToken: TOKEN, bodyLimitBytes: 100, metrics: createMetrics("t"), log });
  return { listener, reached };
}

/** What a client can see of an answer, minus the per-request parts. */
const visible = (res: request.Response) => ({ status: res.status, body: res.body, type: res.headers["content-type"], replayed: res.headers["idempotent-replayed"] });

describe("JSON routes: the fast path and express answer alike", () => {
  it("tells the handler, on both paths, when the caller closed the connection before the answer", async () => {
    const seen: Array<{ path: string; before: boolean; after: boolean }> = [];
    let callerGone!: () => void;
    const waiting: JsonRoute = {
      method: "POST",
      path: "/api/v1/wait",
      async handler(req) {
        const before = req.abandoned();
        await new Promise<void>((resolve) => (callerGone = resolve));
        // The close reaches the server a moment after the client's abort: looked for until it does (or the deadline).
        for (const deadline = Date.now() + 10_000; !req.abandoned() && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
        seen.push({ path: req.headers["x-path"] as string, before, after: req.abandoned() });
        return { status: 200, body: {} };
      },
    };
    const server = createServer(createServiceHandler({ service: "t", log, internalToken: TOKEN, readiness: {}, routes: express.Router(), jsonRoutes: [waiting] }));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    try {
      for (const [kind, path] of [["fast", "/api/v1/wait"], ["express", "/api/v1/wait/"]]) {
        const abort = new AbortController();
        const call = fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { ...internal, "content-type": "application/json", "x-path": kind }, body: "{}", signal: abort.signal }).catch(() => undefined);
        for (const deadline = Date.now() + 10_000; !callerGone && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
        abort.abort();
        await call;
        const release = callerGone;
        callerGone = undefined as unknown as () => void;
        release();
        for (const deadline = Date.now() + 15_000; seen.length < (kind === "fast" ? 1 : 2) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
      }
      expect(seen).to.deep.equal([
        { path: "fast", before: false, after: true },
        { path: "express", before: false, after: true },
      ]);
      // An answered call was never abandoned.
      const answered: boolean[] = [];
      const plain = createServiceHandler({ service: "t", log, internalToken: TOKEN, readiness: {}, routes: express.Router(), jsonRoutes: [{ method: "POST", path: "/api/v1/plain", async handler(req) { answered.push(req.abandoned()); return { status: 200, body: {} }; } }] });
      await request(plain).post("/api/v1/plain").set(internal).send({}).expect(200);
      expect(answered).to.deep.equal([false]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it("serves the exact path on the fast path and every variant on express, with the same answers", async () => {
    const { listener, reached } = countingListener();
    const fast = await request(listener).post("/api/v1/things").set(internal).set("Idempotency-Key", "k1").send({ name: "a" });
    expect(reached).to.deep.equal([]);
    expect(fast.status).to.equal(201);

    const h = handler();
    const viaFast = await request(h).post("/api/v1/things").set(internal).set("Idempotency-Key", "k1").send({ name: "a" });
    const viaExpress = await request(h).post("/api/v1/things/").set(internal).set("Idempotency-Key", "k1").send({ name: "a" });
    expect(visible(viaFast)).to.deep.equal({ status: 201, body: { name: "a", org: "org_1", key: "k1" }, type: "application/json; charset=utf-8", replayed: "true" });
    expect(visible(viaExpress)).to.deep.equal(visible(viaFast));
    const sameId = await request(h).post("/api/v1/things").set(internal).set("X-Request-Id", "req-abc").send({ name: "a" });
    expect(sameId.headers["x-request-id"]).to.equal("req-abc");
    expect(viaFast.headers["x-request-id"]).to.match(/^req_/);
  });

  it("leaves queries, other methods, other types, compressed, chunked and oversized bodies to express", async () => {
    const { listener, reached } = countingListener();
    await request(listener).post("/api/v1/things?x=1").set(internal).send({ name: "a" });
    await request(listener).get("/api/v1/things").set(internal);
    await request(listener).post("/api/v1/things").set(internal).set("Content-Type", "text/plain").send("{}");
    await request(listener).post("/api/v1/things").set(internal).set("Content-Type", "application/json; charset=latin1").send("{}");
    await request(listener).post("/api/v1/things").set(internal).set("Content-Type", "application/json").set("Content-Encoding", "gzip").send("{}");
    await request(listener).post("/api/v1/things").set(internal).set("Content-Type", "application/json").send(JSON.stringify({ name: "x".repeat(200) }));
    const chunked = request(listener).post("/api/v1/things").set(internal).set("Content-Type", "application/json");
    chunked.write("{}");
    await chunked;
    expect(reached).to.have.length(7);
  });

  it("answers the same errors as express: token, JSON, validation, ApiError headers, 500 without internals", async () => {
    const h = handler();
    for (const path of ["/api/v1/things", "/api/v1/things/"]) {
      const noToken = await request(h).post(path).send({ name: "a" });
      expect([noToken.status, noToken.body.error.code]).to.deep.equal([401, "UNAUTHORIZED"]);
      const badJson = await request(h).post(path).set(internal).set("Content-Type", "application/json").send("{oops");
      expect([badJson.status, badJson.body.error.code]).to.deep.equal([400, "INVALID_JSON"]);
      const empty = await request(h).post(path).set(internal).set("Content-Type", "application/json").send("");
      expect([empty.status, empty.body.error.details[0].path]).to.deep.equal([400, "name"]);
      const nul = await request(h).post(path).set(internal).send({ name: "a\u0000" });
      expect([nul.status, nul.body.error.details[0].path]).to.deep.equal([400, "name"]);
      const latin = await request(h).post(path).set(internal).set("Content-Type", "application/json").serialize(raw).send(Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]));
      expect([latin.status, latin.body.error.code, latin.body.error.message]).to.deep.equal([400, "INVALID_JSON", "The body is not UTF-8 JSON"]);
      const lone = await request(h).post(path).set(internal).set("Content-Type", "application/json").send('{"name":"\\ud800"}');
      expect([lone.status, lone.body.error.details[0].path]).to.deep.equal([400, "name"]);
      const limited = await request(h).post(path).set(internal).send({ name: "limited" });
      expect([limited.status, limited.headers["retry-after"], limited.body.error.code]).to.deep.equal([429, "3", "RATE_LIMITED"]);
      const boom = await request(h).post(path).set(internal).send({ name: "boom" });
      expect(boom.status).to.equal(500);
      expect(JSON.stringify(boom.body)).not.to.contain("secret");
      // Nesting any recursive walk would overflow on is refused before code walks it; 64 levels are fine.
      const deep = await request(h).post(path).set(internal).set("Content-Type", "application/json").send(`{"name":${"[".repeat(20_000)}${"]".repeat(20_000)}}`);
      expect([deep.status, deep.body.error.code, deep.body.error.details[0].path]).to.deep.equal([400, "VALIDATION_ERROR", "body"]);
      const nested = await request(h).post(path).set(internal).set("Content-Type", "application/json").send(`{"name":${"[".repeat(63)}${"]".repeat(63)}}`);
      expect([nested.status, nested.body.error.details[0].path]).to.deep.equal([400, "name"]);
      const noOrg = await request(h).post(path).set("x-internal-token", TOKEN).send({ name: "a" });
      expect([noOrg.status, noOrg.body.error.code]).to.deep.equal([401, "UNAUTHORIZED"]);
    }
    const tooBig = await request(handler({ bodyLimit: "50b" })).post("/api/v1/things").set(internal).send({ name: "x".repeat(100) });
    expect([tooBig.status, tooBig.body.error.code]).to.deep.equal([413, "PAYLOAD_TOO_LARGE"]);
  });

  it("counts fast-path requests in the latency histogram under the route's path", async () => {
    const metrics = createMetrics("t");
    const h = createServiceHandler({ service: "t", log, internalToken: TOKEN, readiness: {}, routes: express.Router(), jsonRoutes: [thing], metrics });
    await request(h).post("/api/v1/things").set(internal).send({ name: "a" }).expect(201);
    const text = await metrics.registry.metrics();
    expect(text).to.match(/http_request_duration_seconds_count\{service="t",method="POST",route="\/api\/v1\/things",status="201"\} 1/);
  });
});

describe("isDependencyDown", () => {
  it("recognises a refused connection, a database shutting down or refusing connections, and the bus; not a bug or a bad query", async () => {
    const net = await import("node:net");
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((r) => server.close(() => r()));
    const refused = await new Promise<Error>((resolve) => net.connect(port, "127.0.0.1").on("error", resolve));
    expect(isDependencyDown(refused)).to.equal(true);
    expect(isDependencyDown({ name: "QueryFailedError", driverError: { code: "57P01" } })).to.equal(true);
    expect(isDependencyDown({ code: "08006" })).to.equal(true);
    expect(isDependencyDown({ code: "55000" })).to.equal(true);
    expect(isDependencyDown(new Error("Connection terminated unexpectedly"))).to.equal(true);
    expect(isDependencyDown(Object.assign(new Error("nats down"), { name: "BusUnavailableError" }))).to.equal(true);
    expect(isDependencyDown(new TypeError("x is undefined"))).to.equal(false);
    expect(isDependencyDown({ code: "23505" })).to.equal(false);
    expect(isDependencyDown({ code: "42P01" })).to.equal(false);
  });

  it("answers 400 INVALID_JSON (not a code outside the contract) for a body in another charset", async () => {
    const res = await request(handler()).post("/api/v1/things").set(internal).set("Content-Type", "application/json; charset=latin1").send("{}");
    expect([res.status, res.body.error.code]).to.deep.equal([400, "INVALID_JSON"]);
  });

  it("reads a body labelled with another name of UTF-8 or of ASCII as UTF-8", async () => {
    for (const charset of ["utf8", "UTF8", '"utf8"', "us-ascii", "US-ASCII", "ascii"]) {
      const res = await request(handler()).post("/api/v1/things").set(internal).set("Content-Type", `application/json; charset=${charset}`).send('{"name":"é"}');
      expect([res.status, res.body.name], charset).to.deep.equal([201, "é"]);
    }
  });
});
