/**
 * Reference servers: `node bare-server.js express|http|insert|parse` prints its port.
 * `express` and `http` answer the gateway benchmark's JSON; `insert` is the
 * messages benchmark's reference, a bare express app that parses the JSON body
 * and does one INSERT per request against the same Postgres (DATABASE_URL);
 * `parse` is the template-jobs accept reference: a bare express app that
 * receives a body of up to 16 MB, JSON.parses it and answers its recipient count.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { Pool } from "pg";
import { newId } from "@platform/id";

const kind = process.argv[2];
const body = { ok: true, organizationId: "org_01jd0000000000000000000000" };
let server: http.Server;
if (kind === "insert") {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  const app = express();
  app.use(express.json());
  app.post("/api/v1/messages", async (req, res) => {
    const id = newId("message");
    await pool.query(`INSERT INTO bare_messages (id, body) VALUES ($1, $2)`, [id, JSON.stringify(req.body)]);
    res.status(200).json({ id, status: "sent" });
  });
  server = http.createServer(app);
  void pool
    .query(`CREATE TABLE IF NOT EXISTS bare_messages (id text PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
    .then(() => server.listen(0, "127.0.0.1"));
} else if (kind === "parse") {
  const app = express();
  app.use(express.json({ limit: "16mb" }));
  app.post("/api/v1/templates/send", (req, res) => {
    res.status(200).json({ recipients: Array.isArray(req.body?.recipients) ? req.body.recipients.length : 0 });
  });
  server = app.listen(0, "127.0.0.1");
} else if (kind === "express") {
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
