/** Reference servers for the gateway benchmark: `node bare-server.js express|http` prints its port. */
import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";

const kind = process.argv[2];
const body = { ok: true, organizationId: "org_01jd0000000000000000000000" };
let server: http.Server;
if (kind === "express") {
  const app = express();
  app.get("/api/v1/ping", (_req, res) => {
    res.json(body);
  });
  server = app.listen(0, "127.0.0.1");
} else {
  const payload = JSON.stringify(body);
  server = http.createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(payload) });
    res.end(payload);
  });
  server.listen(0, "127.0.0.1");
}
server.on("listening", () => process.stdout.write(JSON.stringify({ port: (server.address() as AddressInfo).port }) + "\n"));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
