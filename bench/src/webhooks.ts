/**
 * `npm run bench -- webhooks`: the webhook dispatcher against a real
 * Postgres, NATS (JetStream) and a loopback receiver. Events take the
 * production path: JetStream → consumer → delivery jobs → signed POST. A
 * second process publishes the events (as the other services would) and
 * receives the webhooks, so the dispatcher's process does only its own work.
 *
 * Targets (issue): at least 2,000 deliveries per second to a local receiver;
 * event-to-delivery p99 under 100 ms at 500 events per second; a receiver
 * hanging for 10 s lowers the throughput to healthy receivers by at most 10%.
 */
import path from "node:path";
import { newId } from "@platform/id";
import { startService } from "@platform/service";
import { createTestEnvironment } from "@platform/testing";
import { definition } from "@platform/webhook-dispatcher";
import { startChild, stopChild } from "./lib";

const HEALTHY_WEBHOOKS = 10;
const THROUGHPUT_EVENTS = 20_000;
const LATENCY_RATE = 500;
const LATENCY_SECONDS = 10;
const ROUNDS = 3;
const progress = (msg: string) => process.stderr.write(`[webhooks bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

type Stats = { arrivals: Array<[string, string, number]>; publishedAt: Record<string, number> };

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchwebhooks");
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
  const load = await startChild(path.join(__dirname, "webhook-receiver.js"), [], {
    ...process.env,
    HANG_MS: "10000",
    NATS_URL: env.natsUrl,
    BUS_NAMESPACE: env.namespace,
  });
  const base = `http://127.0.0.1:${load.port}`;
  const call = async <T>(p: string, body: unknown = {}): Promise<T> => {
    const res = await fetch(base + p, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return (await res.json()) as T;
  };
  const stats = () => call<Stats>("/stats");

  const createWebhook = async (org: string, url: string) => {
    const res = await fetch(`${svc.url}/admin/v1/organizations/${org}/webhooks`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-internal-token": env.internalToken, "x-organization-id": org },
      body: JSON.stringify({ url, events: ["message.sent"] }),
    });
    if (res.status !== 201) throw new Error(`webhook creation failed: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { id: string }).id;
  };
  const waitFor = async (kind: string, count: number, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const a = (await stats()).arrivals.filter((x) => x[0] === kind);
      if (a.length >= count || Date.now() > deadline) return a;
      await sleep(250);
    }
  };

  /** Publishes the events as fast as JetStream acks them; deliveries per second from the first publish to the last delivery. */
  const throughput = async (orgs: string[], count: number, extraOrg?: string) => {
    await call("/reset");
    const { start } = await call<{ start: number }>("/publish", { orgs, count, extraOrg });
    const got = await waitFor("ok", count, 180_000);
    const last = Math.max(...got.map((x) => x[2]));
    const first = Math.min(...got.map((x) => x[2]));
    const seconds = (last - start) / 1000;
    progress(`delivered ${got.length} of ${count} in ${seconds.toFixed(1)} s`);
    return { rate: Math.round(got.length / seconds), steady: Math.round(got.length / ((last - first) / 1000)), delivered: got.length, seconds };
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
    // An 11th webhook gets one event per ten: healthy in the reference run, hanging in the other,
    // so both runs do the same work and differ only by the hanging receiver.
    const extraOrg = newId("organization");
    await createWebhook(extraOrg, `${base}/extra/0`);
    const hangOrg = newId("organization");
    const hangWebhook = await createWebhook(hangOrg, `${base}/hang/0`);

    progress("warm-up");
    await throughput(healthyOrgs, 5_000);

    progress("latency at a steady rate");
    await call("/reset");
    await call("/paced", { org: latencyOrg, rate: LATENCY_RATE, seconds: LATENCY_SECONDS });
    await waitFor("ok", LATENCY_RATE * LATENCY_SECONDS, 30_000);
    const s = await stats();
    const latencies = s.arrivals
      .filter((a) => s.publishedAt[a[1]] !== undefined)
      .map((a) => a[2] - s.publishedAt[a[1]])
      .sort((a, b) => a - b);

    // The machine is shared: alternate the two runs and compare medians.
    const healthyRuns: Array<Awaited<ReturnType<typeof throughput>>> = [];
    const hangRuns: Array<Awaited<ReturnType<typeof throughput>>> = [];
    let hangs = 0;
    for (let round = 0; round < ROUNDS; round++) {
      progress(`round ${round + 1}: healthy receivers`);
      healthyRuns.push(await throughput(healthyOrgs, THROUGHPUT_EVENTS, extraOrg));
      // Re-enabled each round, so it is still hanging rather than deactivated after 10 timeouts.
      await fetch(`${svc.url}/admin/v1/organizations/${hangOrg}/webhooks/${hangWebhook}`, {
        method: "PATCH",
        headers: { "content-type": "application/json", "x-internal-token": env.internalToken, "x-organization-id": hangOrg },
        body: JSON.stringify({ active: true }),
      });
      progress(`round ${round + 1}: one receiver hanging`);
      hangRuns.push(await throughput(healthyOrgs, THROUGHPUT_EVENTS, hangOrg));
      hangs += (await stats()).arrivals.filter((x) => x[0] === "hang").length;
    }
    const median = (runs: Array<{ rate: number }>) => [...runs].sort((a, b) => a.rate - b.rate)[Math.floor(runs.length / 2)];
    const healthy = median(healthyRuns);
    const withHang = median(hangRuns);
    const ratio = withHang.rate / healthy.rate;

    return [
      "Dispatcher in the bench process (8 attempts in flight per webhook); a second process publishes the events to JetStream and receives the webhooks on loopback; Postgres 15 and nats-server 2.9 on the same 2-core machine.",
      "",
      "| measure | result | target |",
      "|---|---|---|",
      `| deliveries per second, ${THROUGHPUT_EVENTS} events over ${HEALTHY_WEBHOOKS} webhooks (+10% to an 11th, healthy), first publish → last delivery to the ten; median of ${ROUNDS} | ${healthy.rate}/s (runs: ${healthyRuns.map((r) => r.rate).join(", ")}) | ≥ 2,000/s |`,
      `| event-to-delivery latency at ${LATENCY_RATE} events/s for ${LATENCY_SECONDS} s (${latencies.length} deliveries) | p50 ${percentile(latencies, 0.5).toFixed(1)} ms, p99 ${percentile(latencies, 0.99).toFixed(1)} ms, max ${latencies[latencies.length - 1].toFixed(1)} ms | p99 < 100 ms |`,
      `| same runs while the 11th webhook's receiver hangs 10 s on every request (${hangs} requests hung in all) | ${withHang.rate}/s to the ten healthy ones (runs: ${hangRuns.map((r) => r.rate).join(", ")}), median ${(ratio * 100).toFixed(0)}% of the healthy median | ≥ 90% |`,
    ].join("\n");
  } finally {
    await stopChild(load.child);
    await svc.stop();
    await env.cleanup();
  }
}
