import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { HttpSender, RESPONSE_BODY_LIMIT } from "../src/use-cases/http-sender";

/**
 * The sender against real loopback servers: what one attempt reports for the answers a receiver can give, including
 * the ones that never end (a body without end, a body that stalls, a connection cut mid-answer).
 */
describe("HTTP sender (one attempt, loopback)", () => {
  let server: http.Server;
  let url: string;
  let handle: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  const received: { path: string; body: string; headers: http.IncomingHttpHeaders }[] = [];
  /** Generous: a legitimate answer on a busy machine stays well inside it; the stalled ones wait it out. */
  const TIMEOUT_MS = 2_000;
  const sender = new HttpSender({ timeoutMs: TIMEOUT_MS, allowPrivate: true });

  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ path: req.url ?? "", body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
        handle(req, res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    received.length = 0;
  });
  after(async () => {
    await sender.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("POSTs the bytes and headers to the URL's path and query (not its fragment), and reports a 2xx with its body", async () => {
    handle = (_req, res) => res.writeHead(202, { "content-type": "text/plain" }).end("queued");
    const out = await sender.send(`${url}/hooks/in?tenant=a#frag`, Buffer.from('{"a":1}'), { "content-type": "application/json", "x-test": "1" });
    expect(out).to.include({ ok: true, status: 202, body: "queued", error: null });
    expect(received).to.have.length(1);
    expect(received[0]).to.deep.include({ path: "/hooks/in?tenant=a", body: '{"a":1}' });
    expect(received[0].headers).to.include({ "content-type": "application/json", "x-test": "1", "content-length": "7" });
  });

  it("reports a non-2xx as a failure with its status and body; a 3xx is not followed", async () => {
    handle = (_req, res) => res.writeHead(500).end("boom");
    expect(await sender.send(`${url}/a`, Buffer.from("{}"), {})).to.include({ ok: false, status: 500, body: "boom", error: "HTTP 500" });
    handle = (req, res) => (req.url === "/a" ? res.writeHead(302, { location: `${url}/b` }).end() : res.writeHead(200).end("followed"));
    expect(await sender.send(`${url}/a`, Buffer.from("{}"), {})).to.include({ ok: false, status: 302, error: "HTTP 302" });
    expect(received.map((r) => r.path)).to.deep.equal(["/a", "/a"]);
  });

  it("answers as soon as it holds enough of an endless body for the attempt log, cut by characters", async () => {
    let stopped = false;
    handle = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("é".repeat(600));
      const more = () => {
        if (stopped || res.destroyed) return;
        if (res.write("a".repeat(4096))) setImmediate(more);
        else res.once("drain", more);
      };
      res.on("close", () => (stopped = true));
      more();
    };
    const out = await sender.send(`${url}/endless`, Buffer.from("{}"), {});
    stopped = true;
    expect(out).to.include({ ok: true, status: 200, error: null });
    expect(out.body).to.have.length(RESPONSE_BODY_LIMIT);
    expect(out.body).to.equal("é".repeat(600) + "a".repeat(RESPONSE_BODY_LIMIT - 600));
  });

  it("keeps the status when the body stalls past the timeout (the body is then unknown)", async () => {
    handle = (_req, res) => {
      res.writeHead(200);
      res.flushHeaders();
    };
    expect(await sender.send(`${url}/stall`, Buffer.from("{}"), {})).to.include({ ok: true, status: 200, body: null, error: null });
    handle = (_req, res) => {
      res.writeHead(503, { "content-length": "100" });
      res.write("partial");
    };
    expect(await sender.send(`${url}/stall`, Buffer.from("{}"), {})).to.include({ ok: false, status: 503, body: null, error: "HTTP 503" });
  });

  it("reports no answer within the timeout, a connection cut before the answer, and a refused connection as errors", async () => {
    handle = () => undefined;
    expect(await sender.send(`${url}/hang`, Buffer.from("{}"), {})).to.include({ ok: false, status: null, body: null, error: `timeout after ${TIMEOUT_MS} ms` });
    handle = (req) => req.socket.destroy();
    const cut = await sender.send(`${url}/cut`, Buffer.from("{}"), {});
    expect(cut).to.include({ ok: false, status: null, body: null });
    expect(cut.error).to.match(/^connection error/);
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await sender.send(`http://127.0.0.1:${port}/x`, Buffer.from("{}"), {});
    expect(refused).to.include({ ok: false, status: null, body: null });
    expect(refused.error).to.match(/^connection error ECONNREFUSED/);
  });

  it("counts an answer that comes after the timeout as a timeout (undici's own clock alone let it through, ~0.5 s late)", async () => {
    handle = (_req, res) => {
      const late = setTimeout(() => res.writeHead(200).end("late"), TIMEOUT_MS + 450);
      res.on("close", () => clearTimeout(late));
    };
    expect(await sender.send(`${url}/late`, Buffer.from("{}"), {})).to.include({ ok: false, status: null, body: null, error: `timeout after ${TIMEOUT_MS} ms` });
  });

  it("reports a URL it cannot send to as an error, without throwing", async () => {
    for (const bad of ["not a url", "ftp://127.0.0.1/x"]) {
      const out = await sender.send(bad, Buffer.from("{}"), {});
      expect(out, bad).to.include({ ok: false, status: null, body: null });
      expect(out.error, bad).to.be.a("string");
    }
  });
});
