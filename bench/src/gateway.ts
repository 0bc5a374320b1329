/**
 * Gateway overhead: authenticated GET /api/v1/ping through the gateway,
 * against a bare express 5 app and a bare node:http server answering the same
 * JSON. Each server runs in its own process; autocannon -c 50 for 5 s each.
 * Then the cost of the shared rate limit (ADR 0002): the gateway's CPU per
 * request and its usage broadcasts per second, for an organization with a huge
 * budget and for one held at its limit (asked more than 10,000 per second).
 */
import path from "node:path";
import { freePort, REPO_ROOT } from "@platform/stack";
import { collectSubject, createTestEnvironment } from "@platform/testing";
import { cpuSeconds, load, startChild, stopChild, type LoadResult } from "./lib";

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchgw");
  const port = await freePort();
  const adminToken = "bench-admin-token-0123456789";
  const gw = await startChild(
    // BENCH_SERVICES_ROOT: the gateway of another checkout (built), for an A/B in the same phase of the machine.
    path.join(process.env.BENCH_SERVICES_ROOT ?? REPO_ROOT, "services/gateway/dist/index.js"),
    [],
    {
      ...process.env,
      PORT: String(port),
      DATABASE_URL: env.databaseUrl,
      NATS_URL: env.natsUrl,
      BUS_NAMESPACE: env.namespace,
      ADMIN_TOKEN: adminToken,
      INTERNAL_TOKEN: env.internalToken,
      LOG_LEVEL: "info",
    },
    /gateway listening/,
  ).catch(async (err) => {
    await env.cleanup();
    throw err;
  });
  const base = `http://127.0.0.1:${port}`;
  const admin = { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" };
  const org = (await (
    await fetch(`${base}/admin/v1/organizations`, { method: "POST", headers: admin, body: JSON.stringify({ name: "bench", rateLimit: { perSecond: 1_000_000, burst: 1_000_000 } }) })
  ).json()) as { id: string };
  const key = (await (await fetch(`${base}/admin/v1/organizations/${org.id}/api-keys`, { method: "POST", headers: admin, body: JSON.stringify({ name: "bench" }) })).json()) as { key: string };
  const auth = { Authorization: `Bearer ${key.key}` };
  /** The Authorization header of a new organization's key. */
  const orgKey = async (name: string, rateLimit: { perSecond: number; burst: number }) => {
    const o = (await (await fetch(`${base}/admin/v1/organizations`, { method: "POST", headers: admin, body: JSON.stringify({ name, rateLimit }) })).json()) as { id: string };
    const k = (await (await fetch(`${base}/admin/v1/organizations/${o.id}/api-keys`, { method: "POST", headers: admin, body: JSON.stringify({ name }) })).json()) as { key: string };
    return { Authorization: `Bearer ${k.key}` };
  };
  const smallBurst = await orgKey("bench-small-burst", { perSecond: 20_000, burst: 1_000 });
  const atLimit = await orgKey("bench-at-limit", { perSecond: 2_000, burst: 1_000 });
  const usage = await collectSubject(env.natsUrl, `${env.namespace}.bcast.ratelimit.usage.v1`);
  const pid = gw.child.pid!;
  /** One load run on the gateway with its CPU (µs per request) and the usage broadcasts it sent per second. */
  const measured = async (headers: Record<string, string>) => {
    const cpuBefore = (await cpuSeconds({ gateway: pid }, [])).gateway[pid];
    const sentBefore = usage.received.length;
    const started = performance.now();
    const r = await load({ url: `${base}/api/v1/ping`, headers });
    const seconds = (performance.now() - started) / 1000;
    const cpu = (await cpuSeconds({ gateway: pid }, [])).gateway[pid] - cpuBefore;
    return { r, seconds, cpuUs: (cpu / r.total) * 1e6, admitted: (r.total - r.non2xx) / seconds, publishes: (usage.received.length - sentBefore) / seconds };
  };
  const costRows: string[] = [];

  const express = await startChild(path.join(__dirname, "bare-server.js"), ["express"], process.env);
  const raw = await startChild(path.join(__dirname, "bare-server.js"), ["http"], process.env);
  const results: Record<string, LoadResult> = {};
  try {
    // Warm-up: JIT and the key cache.
    await load({ url: `${base}/api/v1/ping`, headers: auth, duration: 2 });
    await load({ url: `http://127.0.0.1:${express.port}/api/v1/ping`, duration: 1 });
    results["gateway (auth + rate limit + ping)"] = await load({ url: `${base}/api/v1/ping`, headers: auth });
    results["bare express 5"] = await load({ url: `http://127.0.0.1:${express.port}/api/v1/ping` });
    results["bare node:http"] = await load({ url: `http://127.0.0.1:${raw.port}/api/v1/ping` });
    for (const headers of [smallBurst, atLimit]) await load({ url: `${base}/api/v1/ping`, headers, duration: 1 });
    for (const [name, headers] of [
      ["huge budget (1,000,000/s, burst 1,000,000)", auth],
      ["small burst, under its limit (20,000/s, burst 1,000)", smallBurst],
      ["held at its limit (2,000/s, burst 1,000)", atLimit],
    ] as const) {
      const m = await measured(headers);
      costRows.push(`| ${name} | ${m.r.rps} | ${Math.round(m.admitted)} | ${m.cpuUs.toFixed(1)} | ${m.publishes.toFixed(1)} |`);
    }
  } finally {
    await usage.close();
    await Promise.all([stopChild(gw.child), stopChild(express.child), stopChild(raw.child)]);
    await env.cleanup();
  }
  const expressRps = results["bare express 5"].rps;
  const rows = Object.entries(results).map(
    ([name, r]) => `| ${name} | ${r.rps} | ${((r.rps / expressRps) * 100).toFixed(0)}% | ${r.p50} | ${r.p99} | ${r.non2xx + r.errors} |`,
  );
  const gwr = results["gateway (auth + rate limit + ping)"];
  return [
    "autocannon -c 50 -d 5, each server in its own process, this machine.",
    "",
    "| server | req/s | vs express | p50 ms | p99 ms | errors/non-2xx |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
    "Rate-limit cost (ADR 0002): the gateway's CPU per request and the usage broadcasts it sent, per organization's budget.",
    "",
    "| organization | req/s | admitted/s | gateway CPU µs/req | usage broadcasts/s |",
    "|---|---|---|---|---|",
    ...costRows,
    "",
    `Target: gateway >= 60% of bare express (${((gwr.rps / expressRps) * 100).toFixed(0)}%: ${gwr.rps / expressRps >= 0.6 ? "met" : "NOT met"}), p99 < 10 ms (${gwr.p99} ms: ${gwr.p99 < 10 ? "met" : "NOT met"}).`,
  ].join("\n");
}
