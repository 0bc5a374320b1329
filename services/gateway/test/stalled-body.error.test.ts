import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { GatewayHarness } from "./harness";

/** A service that answers each call once it has read the whole body, except on /hang, which it never answers. */
async function readingService() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url?.startsWith("/api/v1/conversations")) return;
      res.writeHead(200, { "Content-Type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Raw bytes to the gateway; resolves with what came back when the gateway closes the connection. */
function raw(url: string, bytes: string): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    let answer = "";
    const socket = net.connect(Number(port), "127.0.0.1", () => socket.write(bytes));
    socket.setEncoding("utf8");
    socket.on("data", (c: string) => (answer += c));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
  });
}

describe("gateway: a client that never sends the body it announced", () => {
  const h = new GatewayHarness();
  let service: Awaited<ReturnType<typeof readingService>>;
  before(async () => {
    service = await readingService();
    await h.start({ MESSAGING_URL: service.url, UPSTREAM_TIMEOUT_MS: "300" });
  });
  after(async () => {
    await service.close();
    await h.stop();
  });

  it("answers 400 VALIDATION_ERROR and closes the connection when the call runs out of time with the body unsent (503 was the service's fault)", async () => {
    const { key } = await h.organization();
    const answer = await raw(
      h.url,
      `POST /api/v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"text":"x"}`,
    );
    const [head, body] = answer.split("\r\n\r\n");
    expect(head.split("\r\n")[0]).to.equal("HTTP/1.1 400 Bad Request");
    expect(head.toLowerCase()).to.include("connection: close");
    expect(JSON.parse(body)).to.deep.equal({
      error: { code: "VALIDATION_ERROR", message: "The request was not received in time", details: [{ path: "request", message: "not received whole in time" }] },
    });
  });

  it("still answers 503 when the whole body was sent and the service gave no answer in time", async () => {
    const { key } = await h.organization();
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${h.url}/api/v1/conversations`, { headers: { Authorization: `Bearer ${key}` }, agent: false }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(answer.status).to.equal(503);
    expect(JSON.parse(answer.body).error.code).to.equal("SERVICE_UNAVAILABLE");
  });
});
