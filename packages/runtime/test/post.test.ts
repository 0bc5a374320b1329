import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { Pool } from "undici";
import { post, postTarget, PostTimeoutError } from "../src/post";

describe("post (one HTTP POST on an undici dispatcher)", () => {
  let server: http.Server;
  let origin: string;
  let handle: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  const paths: string[] = [];
  let pool: Pool;

  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        paths.push(req.url ?? "");
        handle(req, res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    pool = new Pool(origin, { connections: 1 });
  });
  beforeEach(() => (paths.length = 0));
  after(async () => {
    await pool.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("answers with the status and the whole body", async () => {
    handle = (_req, res) => res.writeHead(201).end("created");
    const answer = await post(pool, { origin, path: "/a?b=1" }, { "content-type": "text/plain" }, "hello");
    expect(answer).to.deep.include({ status: 201, error: null, timedOut: false });
    expect(answer.body?.toString()).to.equal("created");
    expect(paths).to.deep.equal(["/a?b=1"]);
  });

  it("after the headers, a timeout keeps the status and reports the body unknown", async () => {
    handle = (_req, res) => {
      res.writeHead(200);
      res.write("part");
      setTimeout(() => res.end("rest"), 400);
    };
    const answer = await post(pool, { origin, path: "/slow-body" }, {}, "x", { timeoutMs: 150 });
    expect(answer).to.include({ status: 200, body: null, timedOut: true });
    expect(answer.error).to.be.instanceOf(PostTimeoutError);
  });

  it("a call still waiting for a connection at its timeout is answered then and never sent", async () => {
    handle = (req, res) => setTimeout(() => res.writeHead(200).end(req.url), req.url === "/hold" ? 400 : 0);
    const held = post(pool, { origin, path: "/hold" }, {}, "x");
    const queued = await post(pool, { origin, path: "/queued" }, {}, "x", { timeoutMs: 100 });
    expect(queued).to.include({ status: null, body: null, timedOut: true });
    expect((await held).status).to.equal(200);
    expect((await post(pool, { origin, path: "/after" }, {}, "x")).status).to.equal(200);
    expect(paths).to.deep.equal(["/hold", "/after"]);
  });

  it("with lateMs, a sent call answered after its timeout gives that answer as `late`", async () => {
    handle = (_req, res) => setTimeout(() => res.writeHead(200).end("accepted"), 300);
    const answer = await post(pool, { origin, path: "/late" }, {}, "x", { timeoutMs: 100, lateMs: 5_000 });
    expect(answer).to.include({ status: null, body: null, timedOut: true });
    expect(answer.late, "a late answer is awaited").to.be.instanceOf(Promise);
    const late = await answer.late!;
    expect(late).to.include({ status: 200, error: null, timedOut: false });
    expect(late.body?.toString()).to.equal("accepted");
    expect(paths).to.deep.equal(["/late"]);
  });

  it("with lateMs, the late answer is a timeout when nothing came, or when endLate ends the wait", async () => {
    handle = (_req, res) => setTimeout(() => res.writeHead(200).end("too late"), 1_000);
    const bounded = await post(pool, { origin, path: "/later" }, {}, "x", { timeoutMs: 50, lateMs: 100 });
    const late = await bounded.late!;
    expect(late).to.include({ status: null, body: null, timedOut: true });
    expect(late.error?.message).to.equal("no answer within 150 ms");

    const ended = await post(pool, { origin, path: "/ended" }, {}, "x", { timeoutMs: 50, lateMs: 60_000 });
    ended.endLate!();
    expect(await ended.late!).to.include({ status: null, timedOut: true });
  });

  it("with lateMs, a call still waiting for a connection at its timeout is ended then: no late answer", async () => {
    handle = (req, res) => setTimeout(() => res.writeHead(200).end(req.url), req.url === "/hold" ? 400 : 0);
    const held = post(pool, { origin, path: "/hold" }, {}, "x");
    const queued = await post(pool, { origin, path: "/queued" }, {}, "x", { timeoutMs: 100, lateMs: 5_000 });
    expect(queued).to.include({ status: null, body: null, timedOut: true });
    expect(queued.late).to.equal(undefined);
    expect((await held).status).to.equal(200);
    expect((await post(pool, { origin, path: "/after" }, {}, "x")).status).to.equal(200);
    expect(paths).to.deep.equal(["/hold", "/after"]);
  });

  it("says whether the request went out: not for a refused connection, yes for one closed after the request", async () => {
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const closedOrigin = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise((resolve) => probe.close(resolve));
    const refusedPool = new Pool(closedOrigin);
    try {
      expect(await post(refusedPool, { origin: closedOrigin, path: "/x" }, {}, "x", { timeoutMs: 5_000 })).to.include({ status: null, sent: false, timedOut: false });
    } finally {
      await refusedPool.close();
    }
    handle = (req) => req.socket.destroy();
    expect(await post(pool, { origin, path: "/reset" }, {}, "x", { timeoutMs: 5_000 })).to.include({ status: null, sent: true, timedOut: false });
  });

  it("stops reading at the read limit", async () => {
    handle = (_req, res) => {
      res.writeHead(200);
      res.write(Buffer.alloc(64 * 1024, 97));
      // Never ends: only the limit can answer.
    };
    const answer = await post(pool, { origin, path: "/big" }, {}, "x", { readLimit: 1024 });
    expect(answer).to.include({ status: 200, error: null, timedOut: false });
    expect(answer.body!.length).to.be.at.least(1024);
  });

  it("parses a URL into origin and path as undici does (query kept, fragment dropped), and refuses other protocols", () => {
    expect(postTarget("https://example.com:8443/x/y?z=1#f")).to.deep.equal({ origin: "https://example.com:8443", path: "/x/y?z=1" });
    expect(postTarget("http://example.com")).to.deep.equal({ origin: "http://example.com", path: "/" });
    expect(() => postTarget("ftp://example.com/x")).to.throw(TypeError);
    expect(() => postTarget("nope")).to.throw(TypeError);
  });
});
