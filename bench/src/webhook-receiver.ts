/**
 * The load generator and loopback receiver of `npm run bench -- webhooks`, in
 * a process of its own so that the dispatcher's process does only the
 * dispatcher's work. It publishes domain events to JetStream (as the other
 * services would) and receives the webhooks: `/ok/*` answers 200 at once,
 * `/hang/*` after HANG_MS. Control (JSON over HTTP on the same port):
 * `POST /publish {orgs, count, extraOrg?}` (one more event to extraOrg per ten), `POST /paced {org, rate, seconds}`,
 * `GET /stats`, `POST /reset`.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Bus } from "@platform/bus";
import { eventSubject } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";

const HANG_MS = Number(process.env.HANG_MS ?? 10_000);
const now = () => performance.timeOrigin + performance.now();
let arrivals: Array<[string, string, number]> = [];
const publishedAt = new Map<string, number>();
let bus: Bus;

function publish(org: string): { id: string; done: Promise<void> } {
  const id = newId("event");
  const payload = {
    event: "message.sent",
    timestamp: new Date().toISOString(),
    organizationId: org,
    data: {
      id,
      messageId: newId("message"),
      conversationId: newId("conversation"),
      contactId: newId("contact"),
      messagingChannelId: newId("channel"),
      phone: "+15550001111",
      status: "sent",
      providerMessageId: "wamid.bench",
    },
  };
  return { id, done: bus.publish(eventSubject("message.sent"), payload, { msgId: id }) };
}

async function publishMany(orgs: string[], count: number, extraOrg?: string): Promise<number> {
  const start = now();
  for (let i = 0; i < count; i += 1_000) {
    const batch: Promise<void>[] = [];
    for (let j = i; j < i + 1_000 && j < count; j++) {
      batch.push(publish(orgs[j % orgs.length]).done);
      if (extraOrg && j % 10 === 0) batch.push(publish(extraOrg).done);
    }
    await Promise.all(batch);
  }
  return start;
}

async function paced(org: string, rate: number, seconds: number): Promise<void> {
  const perTick = rate / 100;
  const t0 = now();
  const pending: Promise<void>[] = [];
  for (let t = 0; t < seconds * 100; t++) {
    for (let k = 0; k < perTick; k++) {
      const at = now();
      const p = publish(org);
      publishedAt.set(p.id, at);
      pending.push(p.done);
    }
    const wait = t0 + (t + 1) * 10 - now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  await Promise.all(pending);
}

function readJson(req: http.IncomingMessage): Promise<any> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {}));
  });
}

const server = http.createServer((req, res) => {
  const url = req.url ?? "/";
  const answer = (body: unknown) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (url.startsWith("/ok") || url.startsWith("/hang") || url.startsWith("/extra")) {
    const at = now();
    req.resume();
    req.on("end", () => {
      const kind = url.startsWith("/hang") ? "hang" : url.startsWith("/extra") ? "extra" : "ok";
      arrivals.push([kind, String(req.headers["webhook-id"] ?? ""), at]);
      if (kind === "hang") {
        const timer = setTimeout(() => res.writeHead(200).end("late"), HANG_MS);
        res.on("close", () => clearTimeout(timer));
      } else {
        res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      }
    });
    return;
  }
  void (async () => {
    const body = await readJson(req);
    if (url === "/reset") {
      arrivals = [];
      publishedAt.clear();
      return answer({});
    }
    if (url === "/stats") return answer({ arrivals, publishedAt: Object.fromEntries(publishedAt) });
    if (url === "/publish") return answer({ start: await publishMany(body.orgs, body.count, body.extraOrg) });
    if (url === "/paced") return answer({ done: await paced(body.org, body.rate, body.seconds) });
    res.writeHead(404).end();
  })().catch((err) => {
    res.writeHead(500).end(String((err as Error).message));
  });
});
server.keepAliveTimeout = 60_000;

void (async () => {
  bus = await Bus.connect({ url: process.env.NATS_URL!, namespace: process.env.BUS_NAMESPACE, name: "bench-load", log: createLogger("bench-load", "silent") });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(JSON.stringify({ msg: "receiver listening", port: (server.address() as AddressInfo).port }) + "\n");
  });
})();
process.on("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => void bus.close().then(() => process.exit(0)));
});
