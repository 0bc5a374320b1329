/**
 * `npm run bench -- webhooks`: the webhook dispatcher against a real
 * Postgres, NATS (JetStream) and a loopback receiver in its own process.
 * Events go the production path: JetStream → consumer → delivery jobs →
 * signed POST.
 *
 * Targets (issue): at least 2,000 deliveries per second to a local receiver;
 * event-to-delivery p99 under 100 ms at 500 events per second; a receiver
 * hanging for 10 s lowers the throughput to healthy receivers by at most 10%.
 */
import path from "node:path";
import { Bus } from "@platform/bus";
import { eventSubject } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startService } from "@platform/service";
import { createTestEnvironment } from "@platform/testing";
import { definition } from "@platform/webhook-dispatcher";
import { startChild, stopChild } from "./lib";

const HEALTHY_WEBHOOKS = 10;
const THROUGHPUT_EVENTS = 20_000;
const LATENCY_RATE = 500;
const LATENCY_SECONDS = 10;
const now = () => performance.timeOrigin + performance.now();
const progress = (msg: string) => process.stderr.write(`[webhooks bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchwebhooks");
  const receiver = await startChild(path.join(__dirname, "webhook-receiver.js"), [], { ...process.env, HANG_MS: "10000" });
  const base = `http://127.0.0.1:${receiver.port}`;
  const svc = await startService(
    definition,
    {
      DATABASE_URL: env.databaseUrl,
      NATS_URL: env.natsUrl,
      BUS_NAMESPACE: env.namespace,
      INTERNAL_TOKEN: env.internalToken,
      PORT: "0",
      LOG_LEVEL: "silent",
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    },
    { exitOnConfigError: false },
  );
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bench-webhooks", log: createLogger("bench", "silent") });

  const createWebhook = async (org: string, url: string) => {
    const res = await fetch(`${svc.url}/admin/v1/organizations/${org}/webhooks`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-internal-token": env.internalToken, "x-organization-id": org },
      body: JSON.stringify({ url, events: ["message.sent"] }),
    });
    if (res.status !== 201) throw new Error(`webhook creation failed: ${res.status} ${await res.text()}`);
  };
  const event = (org: string) => {
    const id = newId("event");
    return {
      id,
      payload: {
        event: "message.sent",
        timestamp: new Date().toISOString(),
        organizationId: org,
        data: { id, messageId: newId("message"), conversationId: newId("conversation"), contactId: newId("contact"), messagingChannelId: newId("channel"), phone: "+15550001111", status: "sent", providerMessageId: "wamid.bench" },
      },
    };
  };
  const publish = (org: string) => {
    const e = event(org);
    return { id: e.id, done: bus.publish(eventSubject("message.sent"), e.payload, { msgId: e.id }) };
  };
  const arrivals = async (): Promise<Array<[string, string, number]>> => (await fetch(`${base}/stats`)).json() as Promise<Array<[string, string, number]>>;
  const reset = () => fetch(`${base}/reset`, { method: "POST" });
  const waitFor = async (kind: string, count: number, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const a = (await arrivals()).filter((x) => x[0] === kind);
      if (a.length >= count || Date.now() > deadline) return a;
      await sleep(200);
    }
  };

  /** Publishes `count` events spread over the orgs as fast as JetStream acks them; returns healthy deliveries per second. */
  const throughput = async (healthyOrgs: string[], hangOrg?: string): Promise<{ rate: number; delivered: number; seconds: number }> => {
    await reset();
    const start = now();
    for (let i = 0; i < THROUGHPUT_EVENTS; i += 1_000) {
      const batch: Promise<void>[] = [];
      for (let j = i; j < i + 1_000 && j < THROUGHPUT_EVENTS; j++) {
        batch.push(publish(healthyOrgs[j % healthyOrgs.length]).done);
        if (hangOrg && j % 10 === 0) batch.push(publish(hangOrg).done);
      }
      await Promise.all(batch);
    }
    progress(`published ${THROUGHPUT_EVENTS} events in ${((now() - start) / 1000).toFixed(1)} s`);
    const got = await waitFor("ok", THROUGHPUT_EVENTS, 120_000);
    progress(`delivered ${got.length}`);
    const last = Math.max(...got.map((x) => x[2]));
    const seconds = (last - start) / 1000;
    return { rate: Math.round(got.length / seconds), delivered: got.length, seconds };
  };

  try {
    const healthyOrgs: string[] = [];
    for (let i = 0; i < HEALTHY_WEBHOOKS; i++) {
      const org = newId("organization");
      healthyOrgs.push(org);
      await createWebhook(org, `${base}/ok/${i}`);
    }
    const latencyOrg = newId("organization");
    await createWebhook(latencyOrg, `${base}/ok/latency`);
    const hangOrg = newId("organization");
    await createWebhook(hangOrg, `${base}/hang/0`);

    // Warm-up (connections, JIT, plans).
    progress("warm-up");
    await throughput(healthyOrgs.slice(0, 2)).catch(() => undefined);
    progress("latency run");

    // 1. Latency at a steady 500 events per second (one webhook).
    await reset();
    const sent = new Map<string, number>();
    const ticks = LATENCY_SECONDS * 100;
    const perTick = LATENCY_RATE / 100;
    const t0 = now();
    for (let t = 0; t < ticks; t++) {
      for (let k = 0; k < perTick; k++) {
        const at = now();
        const p = publish(latencyOrg);
        sent.set(p.id, at);
        void p.done;
      }
      const next = t0 + (t + 1) * 10;
      const wait = next - now();
      if (wait > 0) await sleep(wait);
    }
    const latArrivals = await waitFor("ok", sent.size, 30_000);
    const latencies = latArrivals.filter((a) => sent.has(a[1])).map((a) => a[2] - sent.get(a[1])!).sort((a, b) => a - b);

    progress(`latency: ${latencies.length} deliveries`);
    // 2. Throughput to 10 healthy webhooks.
    const healthy = await throughput(healthyOrgs);

    // 3. The same, while one more webhook's receiver hangs 10 s on every request.
    const withHang = await throughput(healthyOrgs, hangOrg);
    const hangs = (await arrivals()).filter((x) => x[0] === "hang").length;
    const ratio = withHang.rate / healthy.rate;

    const lines = [
      "Dispatcher in-process (ts defaults: 8 in flight per webhook, 256 per process), receiver in its own process on loopback, Postgres 15 and nats-server 2.9 on the same 2-core machine.",
      "",
      "| measure | result | target |",
      "|---|---|---|",
      `| deliveries per second, ${THROUGHPUT_EVENTS} events over ${HEALTHY_WEBHOOKS} webhooks (publish → delivered) | ${healthy.rate}/s (${healthy.delivered} in ${healthy.seconds.toFixed(1)} s) | ≥ 2,000/s |`,
      `| event-to-delivery latency at ${LATENCY_RATE} events/s for ${LATENCY_SECONDS} s (${latencies.length} deliveries) | p50 ${percentile(latencies, 0.5).toFixed(1)} ms, p99 ${percentile(latencies, 0.99).toFixed(1)} ms, max ${latencies[latencies.length - 1].toFixed(1)} ms | p99 < 100 ms |`,
      `| deliveries per second to the healthy webhooks while one receiver hangs 10 s (${hangs} requests hanging) | ${withHang.rate}/s (${withHang.delivered} in ${withHang.seconds.toFixed(1)} s), ${(ratio * 100).toFixed(0)}% of the healthy run | ≥ 90% |`,
    ];
    return lines.join("\n");
  } finally {
    await bus.close();
    await svc.stop();
    await stopChild(receiver.child);
    await env.cleanup();
  }
}
