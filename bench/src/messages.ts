/**
 * `npm run bench -- messages`: sustained POST /api/v1/messages to the provider
 * simulator, through a real messaging service and a real contacts service
 * (each its own process, as under `npm start`), Postgres and NATS.
 *
 * Target (issue): at least 1,000 messages per second with p99 under 50 ms on
 * this 2-core machine, every service under 200 MB resident.
 *
 * Requests go through the gateway (API key, rate limit, proxy) to messaging,
 * which asks contacts over the bus and calls the simulator. Statuses are not
 * posted back (no webhook URL), so the load is the send path alone; 2,000
 * recipients each have an open service window, spread over two channels of
 * 1,000 messages per second (BENCH_CHANNELS changes the count). One run per
 * load level (4, 16, 24, 32 and 64 connections; BENCH_CONNECTIONS=8,32 changes them),
 * with each process's CPU per request, since throughput and latency trade
 * against each other through the concurrency. BENCH_SERVICES_ROOT runs the
 * services of another built checkout (an A/B in the same phase of the machine).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import type autocannon from "autocannon";
import { Client } from "pg";
import { Bus } from "@platform/bus";
import { SUBJECTS } from "@platform/contracts";
import { createLogger } from "@platform/logging";
import { startSimulator } from "@platform/provider-simulator";
import { freePort } from "@platform/stack";
import { createTestEnvironment } from "@platform/testing";
import { cpuReport, cpuSeconds, load, rssMb, startChild, stopChild } from "./lib";

const RECIPIENTS = 2_000;
const CHANNELS = Number(process.env.BENCH_CHANNELS ?? 2);
const DURATION_S = Number(process.env.BENCH_SECONDS ?? 12);
/** Duration of the reference run (bare express + one INSERT) after each level. */
const BARE_DURATION_S = Number(process.env.BENCH_BARE_SECONDS ?? 5);
/** Load levels (concurrent connections); BENCH_CONNECTIONS=4,64 overrides. */
const LEVELS = (process.env.BENCH_CONNECTIONS ?? "4,16,24,32,64").split(",").map(Number);

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchmsg");
  const sim = await startSimulator({ accessToken: "bench-token", autoStatuses: false, maxRecordedRequests: 1_000 });
  const baseEnv = {
    ...process.env,
    DATABASE_URL: env.databaseUrl,
    NATS_URL: env.natsUrl,
    BUS_NAMESPACE: env.namespace,
    INTERNAL_TOKEN: env.internalToken,
    PORT: "0",
    LOG_LEVEL: "warn",
  };
  // BENCH_SERVICES_ROOT: run the services of another checkout (built), for an A/B against it in the same phase of the machine.
  const root = process.env.BENCH_SERVICES_ROOT ?? path.resolve(__dirname, "../..");
  // Contacts first: messaging's opt-out check and contact resolution ask it over the bus.
  const contacts = await startChild(path.join(root, "services/contacts/dist/index.js"), [], { ...baseEnv, LOG_LEVEL: "info" }, /listening/);
  const messaging = await startChild(
    path.join(root, "services/messaging/dist/index.js"),
    [],
    { ...baseEnv, LOG_LEVEL: "info", PROVIDER_BASE_URL: sim.url, PROVIDER_ACCESS_TOKEN: "bench-token" },
    /listening/,
  );
  const gatewayPort = await freePort();
  const adminToken = "bench-admin-token-0123456789";
  const gateway = await startChild(
    path.join(root, "services/gateway/dist/index.js"),
    [],
    {
      ...baseEnv,
      LOG_LEVEL: "info",
      PORT: String(gatewayPort),
      ADMIN_TOKEN: adminToken,
      MESSAGING_URL: `http://127.0.0.1:${messaging.port}`,
      CONTACTS_URL: `http://127.0.0.1:${contacts.port}`,
    },
    /gateway listening/,
  );
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bench-messages", log: createLogger("bench", "silent") });
  const db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
  let bareChild: import("node:child_process").ChildProcess | undefined;
  try {
    const url = `http://127.0.0.1:${gatewayPort}`;
    const admin = { authorization: `Bearer ${adminToken}`, "content-type": "application/json" };
    const orgRes = await fetch(`${url}/admin/v1/organizations`, {
      method: "POST",
      headers: admin,
      body: JSON.stringify({ name: "bench", rateLimit: { perSecond: 1_000_000, burst: 1_000_000 } }),
    });
    const org = ((await orgRes.json()) as { id: string }).id;
    const keyRes = await fetch(`${url}/admin/v1/organizations/${org}/api-keys`, { method: "POST", headers: admin, body: JSON.stringify({ name: "bench" }) });
    const headers = { authorization: `Bearer ${((await keyRes.json()) as { key: string }).key}`, "content-type": "application/json" };
    const channels: Array<{ id: string; providerPhoneNumberId: string }> = [];
    for (let i = 0; i < CHANNELS; i++) {
      const res = await fetch(`${url}/admin/v1/organizations/${org}/channels`, {
        method: "POST",
        headers: admin,
        body: JSON.stringify({ name: `bench ${i}`, phoneNumber: `+1415555${String(1000 + i)}`, providerPhoneNumberId: `bench-pn-${env.namespace}-${i}`, messagesPerSecond: 1000 }),
      });
      if (res.status !== 201) throw new Error(`channel create: ${res.status} ${await res.text()}`);
      channels.push((await res.json()) as { id: string; providerPhoneNumberId: string });
    }

    // Open every recipient's service window the way production does: provider batches on the bus.
    const phones = Array.from({ length: RECIPIENTS }, (_, i) => `+1628${String(2_000_000 + i).padStart(7, "0")}`);
    const now = Math.floor(Date.now() / 1000);
    for (let c = 0; c < CHANNELS; c++) {
      for (let start = 0; start < phones.length; start += 100) {
        const messages = phones.slice(start, start + 100).map((p, i) => ({
          from: p.slice(1),
          id: `wamid.bench.${c}.${start + i}.${env.namespace}`,
          timestamp: String(now),
          type: "text",
          text: { body: "hi" },
        }));
        const body = JSON.stringify({
          object: "whatsapp_business_account",
          entry: [{ id: "waba", changes: [{ field: "messages", value: { metadata: { phone_number_id: channels[c].providerPhoneNumberId }, messages } }] }],
        });
        await bus.publish(SUBJECTS.providerInbound.subject, { body, receivedAt: new Date().toISOString() }, { msgId: createHash("sha256").update(body).digest("hex") });
      }
    }
    const seedStart = Date.now();
    for (;;) {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM messaging.service_windows`);
      if (rows[0].n >= RECIPIENTS * CHANNELS) break;
      if (Date.now() - seedStart > 120_000) throw new Error(`service windows not opened: ${rows[0].n}`);
      await new Promise((r) => setTimeout(r, 200));
    }

    let n = 0;
    const bodyFor = () => {
      const i = n++;
      return JSON.stringify({ to: phones[i % RECIPIENTS], text: `bench message ${i}`, messagingChannelId: channels[i % CHANNELS].id });
    };
    const request: autocannon.Request = { method: "POST", path: "/api/v1/messages", headers, setupRequest: (req) => ({ ...req, body: bodyFor() }) };

    // Warm-up (JIT, pools, caches), then one measured run per load level.
    await load({ url, connections: LEVELS[LEVELS.length - 1], duration: 3, requests: [request] });
    let peakMessaging = 0;
    let peakContacts = 0;
    let peakGateway = 0;
    const sampler = setInterval(() => {
      void rssMb(gateway.child.pid).then((v) => (peakGateway = Math.max(peakGateway, v || 0)));
      void rssMb(messaging.child.pid).then((v) => (peakMessaging = Math.max(peakMessaging, v || 0)));
      void rssMb(contacts.child.pid).then((v) => (peakContacts = Math.max(peakContacts, v || 0)));
    }, 500);
    const pids = { gateway: gateway.child.pid, messaging: messaging.child.pid, contacts: contacts.child.pid, "load+simulator": process.pid };
    // The reference of the same run: a bare express app doing one INSERT per request against the same Postgres.
    const bare = await startChild(path.join(__dirname, "bare-server.js"), ["insert"], { ...process.env, DATABASE_URL: env.databaseUrl });
    bareChild = bare.child;
    const bareUrl = `http://127.0.0.1:${bare.port}`;
    let bareN = 0;
    const bareRequest: autocannon.Request = {
      method: "POST",
      path: "/api/v1/messages",
      headers: { "content-type": "application/json" },
      setupRequest: (req) => ({ ...req, body: JSON.stringify({ to: phones[bareN % RECIPIENTS], text: `bare ${bareN++}` }) }),
    };
    await load({ url: bareUrl, connections: 16, duration: 2, requests: [bareRequest] });
    const rowsOut: string[] = [];
    const cpuLines: string[] = [];
    let met = false;
    let failures = 0;
    for (const connections of LEVELS) {
      const cpuBefore = await cpuSeconds(pids);
      const result = await load({ url, connections, duration: DURATION_S, requests: [request] });
      const cpuAfter = await cpuSeconds(pids);
      failures += result.non2xx + result.errors;
      met ||= result.rps >= 1000 && result.p99 < 50;
      const ref = await load({ url: bareUrl, connections, duration: BARE_DURATION_S, requests: [bareRequest] });
      rowsOut.push(
        `| ${connections} | ${result.rps} | ${result.p50} | ${result.p99} | ${result.non2xx} / ${result.errors} of ${result.total} | ${ref.rps} (p99 ${ref.p99}) | ${((result.rps / ref.rps) * 100).toFixed(0)}% |`,
      );
      cpuLines.push(`- ${connections} connections: ${cpuReport(cpuBefore, cpuAfter, DURATION_S, result.total)}`);
    }
    clearInterval(sampler);
    // Requests in flight when the load stopped still finish; count once they have.
    await new Promise((r) => setTimeout(r, 3_000));
    const { rows } = await db.query(
      `SELECT status, count(*)::int AS n FROM messaging.messages WHERE direction = 'outbound' GROUP BY status ORDER BY status`,
    );

    const statusCounts = rows.map((r: { status: string; n: number }) => `${r.status}: ${r.n}`).join(", ");
    const rssMet = peakMessaging < 200 && peakContacts < 200 && peakGateway < 200;
    return [
      `Sustained \`POST /api/v1/messages\` through the gateway (API key, rate limit, proxy), ${DURATION_S} s per load level after a 3 s warm-up;`,
      `${RECIPIENTS} recipients with open service windows over ${CHANNELS} channels of 1,000 msg/s; provider = simulator (no status callbacks).`,
      "",
      "| connections | messages/s | p50 ms | p99 ms | non-2xx / errors | bare express + 1 INSERT req/s (same run) | messages / bare |",
      "|---|---|---|---|---|---|---|",
      ...rowsOut,
      "",
      `Peak RSS over all levels: messaging ${peakMessaging} MB, contacts ${peakContacts} MB, gateway ${peakGateway} MB (target < 200 MB each: ${rssMet ? "met" : "NOT met"}).`,
      `Target ≥ 1,000 msg/s with p99 < 50 ms at one load level: ${met ? "met" : "NOT met"}. Errors: ${failures}.`,
      `Outbound messages by status after the run: ${statusCounts}.`,
      "",
      ...cpuLines,
    ].join("\n");
  } finally {
    await db.end();
    await bus.close();
    if (bareChild) await stopChild(bareChild);
    await stopChild(gateway.child);
    await stopChild(messaging.child);
    await stopChild(contacts.child);
    await sim.close();
    await env.cleanup();
  }
}
