import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { expect } from "chai";
import { createHttpServer, drainHttpServer } from "../src";

/** Writes raw bytes on a fresh connection and reads until the server closes it: status, headers, body. */
function rawExchange(port: number, bytes: string): Promise<{ status: number; headers: Record<string, string>; body: string; rest: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const end = text.indexOf("\r\n\r\n");
      const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      // The first answer's body by its Content-Length; whatever follows is the next answer on the connection.
      const rest = text.slice(end + 4);
      const length = headers["content-length"] === undefined ? rest.length : Number(headers["content-length"]);
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: rest.slice(0, length), rest: rest.slice(length) });
    });
  });
}

describe("http kit: the server, for requests node:http would refuse with a bare status line", () => {
  let server: http.Server;
  let port: number;
  const handled: string[] = [];
  const listen = async (s: http.Server) => {
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    return (s.address() as AddressInfo).port;
  };
  const close = (s: http.Server) => new Promise<void>((resolve) => s.close(() => resolve()));
  before(async () => {
    server = createHttpServer((req, res) => {
      handled.push(req.url ?? "");
      res.end("ok");
    });
    port = await listen(server);
  });
  after(() => close(server));

  const envelope = (body: string) => JSON.parse(body) as { error: { code: string; message: string; details?: Array<{ path: string; message: string }> } };

  it("answers headers over 16 KB with 413 PAYLOAD_TOO_LARGE (the contract's status for the code, not HTTP's 431) and the error envelope, and closes the connection", async () => {
    const res = await rawExchange(port, `GET /api/v1/ping HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${"k".repeat(20_000)}\r\n\r\n`);
    expect(res.status).to.equal(413);
    expect(res.headers).to.include({ "content-type": "application/json; charset=utf-8", connection: "close" });
    expect(Number(res.headers["content-length"])).to.equal(Buffer.byteLength(res.body));
    expect(envelope(res.body).error).to.deep.equal({ code: "PAYLOAD_TOO_LARGE", message: "The request line and headers are over 16 KB" });
  });

  it("answers a request line over 16 KB (a long query) the same way", async () => {
    const res = await rawExchange(port, `GET /api/v1/ping?x=${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(res.status).to.equal(413);
    expect(envelope(res.body).error.code).to.equal("PAYLOAD_TOO_LARGE");
  });

  it("answers bytes that are not HTTP/1.1 with 400 VALIDATION_ERROR and details", async () => {
    const res = await rawExchange(port, "HELLO THERE\r\n\r\n");
    expect(res.status).to.equal(400);
    expect(envelope(res.body).error).to.deep.equal({
      code: "VALIDATION_ERROR",
      message: "The request is not valid HTTP/1.1",
      details: [{ path: "request", message: "not valid HTTP/1.1" }],
    });
  });

  it("answers a request not received whole in time with 400 VALIDATION_ERROR (not HTTP's 408)", async () => {
    // A server of its own with a short timeout, checked often, so that the other tests never meet it on a slow machine.
    const slow = createHttpServer(() => handled.push("timed out"), { requestTimeout: 300, headersTimeout: 300, connectionsCheckingInterval: 50 });
    try {
      // Headers never finished: the handler never runs, node's timer refuses the request.
      const res = await rawExchange(await listen(slow), "GET /things HTTP/1.1\r\nHost: x\r\n");
      expect(res.status).to.equal(400);
      expect(envelope(res.body).error.code).to.equal("VALIDATION_ERROR");
    } finally {
      await close(slow);
    }
  });

  it("answers an HTTP/1.1 request without Host with 400 VALIDATION_ERROR at headers.host (HTTP/1.0 needs none)", async () => {
    const res = await rawExchange(port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    expect(res.status).to.equal(400);
    expect(envelope(res.body).error.details).to.deep.equal([{ path: "headers.host", message: "required" }]);
    const old = await rawExchange(port, "GET /http-1.0 HTTP/1.0\r\n\r\n");
    expect(old.status).to.equal(200);
  });

  it("answers an Expect other than 100-continue with 400 VALIDATION_ERROR at headers.expect (not HTTP's 417)", async () => {
    const res = await rawExchange(port, "GET / HTTP/1.1\r\nHost: x\r\nExpect: something\r\nConnection: close\r\n\r\n");
    expect(res.status).to.equal(400);
    expect(envelope(res.body).error).to.deep.include({ code: "VALIDATION_ERROR" });
    expect(envelope(res.body).error.details![0].path).to.equal("headers.expect");
  });

  it("keeps the connection of a refused request and drops its unread body, so the next request on it is served", async () => {
    const body = "x".repeat(200_000);
    const res = await rawExchange(
      port,
      `POST /one HTTP/1.1\r\nHost: x\r\nExpect: something\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        "GET /after-refusal HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    expect(res.status).to.equal(400);
    expect(res.rest).to.match(/^HTTP\/1.1 200 OK\r\n/);
    expect(res.rest.endsWith("\r\n\r\nok")).to.equal(true);
  });

  it("answers CONNECT with 404 NOT_FOUND instead of dropping the connection", async () => {
    const res = await rawExchange(port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    expect(res.status).to.equal(404);
    expect(envelope(res.body).error).to.deep.equal({ code: "NOT_FOUND", message: "No route for CONNECT example.com:443" });
  });

  it("routes a request target in absolute form by its path and query (RFC 9112 3.2.2)", async () => {
    for (const [target, path] of [
      ["http://api.example.com/absolute?x=1", "/absolute?x=1"],
      ["HTTPS://api.example.com:8443/v1/a/b#frag", "/v1/a/b"],
      ["http://api.example.com", "/"],
      ["http://api.example.com?q=2", "/?q=2"],
    ]) {
      const res = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n`);
      expect(res.status, target).to.equal(200);
      expect(handled.pop(), target).to.equal(path);
    }
  });

  it("never reached the handler for a refused request, and still serves a well-formed request", async () => {
    const res = await rawExchange(port, "GET /well-formed HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(res.status).to.equal(200);
    expect(res.body).to.equal("ok");
    expect(handled).to.deep.equal(["/http-1.0", "/after-refusal", "/well-formed"]);
  });
});

describe("http kit: drainHttpServer", () => {
  it("stops a server whose keep-alive connections a client keeps busy, every answer given whole", async function () {
    this.timeout(30_000);
    const server = createHttpServer((req, res) => {
      req.resume();
      req.on("end", () => setTimeout(() => res.end("ok"), 2));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    let running = true;
    const answers: Array<{ status: number; body: string }> = [];
    const one = () =>
      new Promise<void>((resolve) => {
        const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/", agent }, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c));
          res.on("end", () => {
            answers.push({ status: res.statusCode!, body });
            resolve();
          });
        });
        // A connection closed as the client reused it: the keep-alive race every HTTP client knows; it tries again.
        req.on("error", () => setTimeout(resolve, 5));
        req.end("x");
      });
    const loops = Array.from({ length: 8 }, async () => {
      while (running) await one();
    });
    try {
      while (answers.length < 50) await new Promise((r) => setTimeout(r, 10));
      const drained = drainHttpServer(server).then(() => "drained");
      // Without the drain, `server.close()` waits for as long as the client keeps its connections busy: forever here.
      const outcome = await Promise.race([drained, new Promise((r) => setTimeout(() => r("still serving"), 15_000))]);
      expect(outcome).to.equal("drained");
      expect(answers.filter((a) => a.status !== 200 || a.body !== "ok")).to.deep.equal([]);
    } finally {
      running = false;
      await Promise.all(loops);
      agent.destroy();
      server.closeAllConnections();
    }
  });
});
