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

  it("answers a request line and headers over 16 KB with 413 and the contract's envelope (the fuzz found a bare 431), then serves the next request", async () => {
    const { key } = await h.organization();
    const huge = await get(`${h.url}/api/v1/ping?x=${"a".repeat(9_000)}`, { Authorization: `Bearer ${"x".repeat(9_000)}` });
    expect(huge.status).to.equal(413);
    expect(huge.connection).to.equal("close");
    expect(JSON.parse(huge.body)).to.deep.equal({ error: { code: "PAYLOAD_TOO_LARGE", message: "The request line and headers are over 16 KB" } });

    const ping = await get(`${h.url}/api/v1/ping`, { Authorization: `Bearer ${key}` });
    expect(ping.status).to.equal(200);
  });

  it("answers a path that is not valid percent-encoding with 400 VALIDATION_ERROR, not a 500 (admin routes of its own)", async () => {
    const { id } = await h.organization();
    for (const [method, path] of [
      ["get", "/admin/v1/organizations/%E0%A4%A"],
      ["patch", "/admin/v1/organizations/%ZZ"],
      ["delete", `/admin/v1/organizations/${id}/api-keys/%ZZ`],
    ] as const) {
      const res = await h.admin()[method](path);
      expect(res.status, `${method} ${path}`).to.equal(400);
      expect(res.body.error).to.include({ code: "VALIDATION_ERROR" });
      expect(res.body.error.details).to.deep.equal([{ path: "url", message: "is not valid percent-encoding" }]);
    }
  });
});
