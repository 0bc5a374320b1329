/**
 * The loopback receiver of `npm run bench -- webhooks`, in its own process so
 * the dispatcher's event loop is measured, not the receiver's. Paths:
 * `/ok/*` answers 200 at once, `/hang/*` answers after HANG_MS. It records the
 * arrival time (epoch ms, fractional) of each delivery by `webhook-id`;
 * `GET /stats?path=/ok` returns them, `POST /reset` clears them.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

const HANG_MS = Number(process.env.HANG_MS ?? 10_000);
const now = () => performance.timeOrigin + performance.now();
let arrivals: Array<[string, string, number]> = [];

const server = http.createServer((req, res) => {
  const url = req.url ?? "/";
  if (req.method === "GET" && url.startsWith("/stats")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(arrivals));
    return;
  }
  if (req.method === "POST" && url === "/reset") {
    arrivals = [];
    res.writeHead(204).end();
    return;
  }
  const at = now();
  req.resume();
  req.on("end", () => {
    const kind = url.startsWith("/hang") ? "hang" : "ok";
    arrivals.push([kind, String(req.headers["webhook-id"] ?? ""), at]);
    if (kind === "hang") {
      const timer = setTimeout(() => res.writeHead(200).end("late"), HANG_MS);
      res.on("close", () => clearTimeout(timer));
    } else {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ msg: "receiver listening", port: (server.address() as AddressInfo).port }) + "\n");
});
process.on("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
