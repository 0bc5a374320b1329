import http from "node:http";
import { expect } from "chai";
import { GatewayHarness } from "./harness";

/** One GET with these headers on a fresh connection: status, Connection header and body. */
function get(url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; connection?: string; body: string }>((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
      })
      .on("error", reject);
  });
}

describe("gateway: a request node:http cannot read", () => {
  const h = new GatewayHarness();
  before(() => h.start());
  after(() => h.stop());

  it("answers a request line and headers over 16 KB with 431 and the contract's envelope (the fuzz found a bare 431), then serves the next request", async () => {
    const { key } = await h.organization();
    const huge = await get(`${h.url}/api/v1/ping?x=${"a".repeat(9_000)}`, { Authorization: `Bearer ${"x".repeat(9_000)}` });
    expect(huge.status).to.equal(431);
    expect(huge.connection).to.equal("close");
    expect(JSON.parse(huge.body)).to.deep.equal({ error: { code: "PAYLOAD_TOO_LARGE", message: "The request line and headers are over 16 KB" } });

    const ping = await get(`${h.url}/api/v1/ping`, { Authorization: `Bearer ${key}` });
    expect(ping.status).to.equal(200);
  });
});
