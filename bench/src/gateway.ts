/**
 * Gateway overhead: authenticated GET /api/v1/ping through the gateway,
 * against a bare express 5 app and a bare node:http server answering the same
 * JSON. Each server runs in its own process; autocannon -c 50 for 5 s each.
 */
import path from "node:path";
import { freePort, REPO_ROOT } from "@platform/stack";
import { createTestEnvironment } from "@platform/testing";
import { load, startChild, stopChild, type LoadResult } from "./lib";

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchgw");
  const port = await freePort();
  const adminToken = "bench-admin-token-0123456789";
  const gw = await startChild(
    path.join(REPO_ROOT, "services/gateway/dist/index.js"),
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
  } finally {
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
    `Target: gateway >= 60% of bare express (${((gwr.rps / expressRps) * 100).toFixed(0)}%: ${gwr.rps / expressRps >= 0.6 ? "met" : "NOT met"}), p99 < 10 ms (${gwr.p99} ms: ${gwr.p99 < 10 ? "met" : "NOT met"}).`,
  ].join("\n");
}
