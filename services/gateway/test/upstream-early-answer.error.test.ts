import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { GatewayHarness } from "./harness";

/**
 * A service that answers a call before reading its body (a check on the URL or the headers refuses it) and then
 * closes its connection. The gateway stops forwarding that body, so the client's connection to the gateway still
 * carries unread bytes: it must not be offered for the client's next call, which would wait and be reset.
 */
async function hastyService() {
  let received = 0;
  const server = http.createServer((req, res) => {
    received++;
    res.writeHead(400, { "Content-Type": "application/json" }).end('{"error":{"code":"VALIDATION_ERROR","message":"refused early"}}', () => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get received() {
      return received;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * One call on a keep-alive agent: its status and Connection header, or the error that ended it. With `holdRest`, only
 * the body's first 64 KB go before the answer and the rest after it, so the answer surely comes while the body is
 * still unread (sent whole, a fast machine could deliver all of it before the service answers, and then the
 * connection may rightly stay open).
 */
function post(url: string, agent: http.Agent, key: string, body: Buffer, holdRest = false) {
  return new Promise<{ status: number; connection?: string } | { error: string }>((resolve) => {
    const req = http.request(`${url}/api/v1/templates/send`, { method: "POST", agent, headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" } }, (res) => {
      if (holdRest) req.end(body.subarray(64 * 1024));
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
    });
    // Once answered, a write error (the rest of the body refused) is not this call's outcome: resolve ignores it.
    req.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code ?? err.message }));
    if (holdRest) req.write(body.subarray(0, 64 * 1024));
    else req.end(body);
  });
}

describe("gateway: a service that answers before the body is read", () => {
  const h = new GatewayHarness();
  let service: Awaited<ReturnType<typeof hastyService>>;
  before(async () => {
    service = await hastyService();
    await h.start({ TEMPLATE_JOBS_URL: service.url });
  });
  after(async () => {
    await service.close();
    await h.stop();
  });

  it("closes the client's connection after that answer, so the client's next call goes on a fresh one and is answered", async () => {
    const { key } = await h.organization();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const big = Buffer.from(JSON.stringify({ blob: "x".repeat(1_100_000) }));
      for (let i = 0; i < 3; i++) {
        // The service's answer, or 503 when its close is seen first: either way the connection is not kept.
        const first = await post(h.url, agent, key, big, true);
        expect(first, JSON.stringify(first)).to.have.property("connection", "close");
        expect([400, 503]).to.include((first as { status: number }).status);
        const next = await post(h.url, agent, key, Buffer.from("{}"));
        expect(next, JSON.stringify(next)).to.have.property("status", 400);
      }
    } finally {
      agent.destroy();
    }
  });
});
