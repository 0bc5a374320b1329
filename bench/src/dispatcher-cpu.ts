/**
 * `npm run bench -- dispatcher-cpu`: the webhook dispatcher's CPU and its
 * Postgres backends' CPU per delivery, nothing else on the path (issue 12).
 * The dispatcher runs as its own process (as under `npm start`); this process
 * publishes `message.received` events to JetStream at a steady rate (as the
 * outbox relays would) and is the integrator's receiver (200 at once). CPU is
 * read from /proc from the first publish until the last delivery: the
 * dispatcher's process and the backends of this run's database, and the
 * transactions committed in that database (each dispatcher statement is one).
 *
 * BENCH_DISPATCH_RATES (500,1500) events per second, BENCH_DISPATCH_SECONDS
 * (10) each; BENCH_DISPATCH_ROOT runs another checkout's built dispatcher
 * (A/B against main's code in the same minutes).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Client } from "pg";
import { Bus } from "@platform/bus";
import { eventSubject } from "@platform/contracts";
import { createLogger } from "@platform/logging";
import { newId } from "@platform/id";
import { createTestEnvironment } from "@platform/testing";
import { cpuSeconds, startChild, stopChild } from "./lib";

const list = (name: string, dflt: string) => (process.env[name] ?? dflt).split(",").map(Number).filter((n) => n > 0);
const RATES = list("BENCH_DISPATCH_RATES", "500,1500");
const SECONDS = Number(process.env.BENCH_DISPATCH_SECONDS ?? 10);
const progress = (msg: string) => process.stderr.write(`[dispatcher-cpu bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchdisp");
  const arrivals = new Set<string>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        arrivals.add((JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data: { id: string } }).data.id);
      } catch {
        /* counted as missing */
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const root = process.env.BENCH_DISPATCH_ROOT ?? path.resolve(__dirname, "../..");
  const dispatcher = await startChild(
    path.join(root, "services/webhook-dispatcher/dist/index.js"),
    [],
    { ...process.env, ...env.serviceEnv({ LOG_LEVEL: "info", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" }) },
    /listening/,
  );
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bench-publisher", log: createLogger("bench", "silent") });
  const db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
  const dbName = new URL(env.databaseUrl).pathname.slice(1);
  const org = newId("organization");
  const created = await fetch(`http://127.0.0.1:${dispatcher.port}/admin/v1/organizations/${org}/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-internal-token": env.internalToken, "x-organization-id": org },
    body: JSON.stringify({ url: receiverUrl, events: ["message.received"] }),
  });
  if (created.status !== 201) throw new Error(`webhook creation answered ${created.status}`);

  const readCpu = async () => {
    const { rows } = await db.query<{ pid: number; datname: string | null }>(`SELECT pid, datname FROM pg_stat_activity`);
    const pids: Record<string, number | undefined> = { dispatcher: dispatcher.child.pid };
    for (const r of rows) if (r.datname === dbName) pids[`pg:${r.pid}`] = r.pid;
    return cpuSeconds(pids, []);
  };
  const used = (before: Awaited<ReturnType<typeof readCpu>>, after: Awaited<ReturnType<typeof readCpu>>) => {
    const out = { dispatcher: 0, postgres: 0 };
    for (const [name, byPid] of Object.entries(after)) {
      const key = name === "dispatcher" ? "dispatcher" : "postgres";
      for (const [pid, cpu] of Object.entries(byPid)) out[key] += Math.max(0, cpu - (before[name]?.[pid] ?? 0));
    }
    return out;
  };
  const event = (id: string) => ({
    event: "message.received",
    timestamp: new Date().toISOString(),
    organizationId: org,
    data: { id, messageId: newId("message"), contactId: newId("contact"), messagingChannelId: newId("channel"), phone: "+15550001111", type: "text", text: "hello, is the shop open on sunday?" },
  });

  // Warm-up: connections, prepared statements, JIT.
  const warm = Array.from({ length: 500 }, () => newId("event"));
  for (const id of warm) await bus.publish(eventSubject("message.received"), event(id), { msgId: id });
  for (const deadline = Date.now() + 30_000; Date.now() < deadline && !warm.every((id) => arrivals.has(id)); ) await sleep(50);

  /** Transactions committed in this run's database (every dispatcher statement is one). */
  const commits = async () =>
    Number((await db.query<{ n: string }>(`SELECT pg_stat_get_db_xact_commit(oid)::text AS n FROM pg_database WHERE datname = $1`, [dbName])).rows[0].n);
  const rows: string[] = [];
  for (const rate of RATES) {
    const ids: string[] = [];
    const load = os.loadavg()[0].toFixed(1);
    await sleep(1_500); // the backends report their counts at most once a second
    await db.query(`SELECT pg_stat_clear_snapshot()`);
    const commitsBefore = await commits();
    const before = await readCpu();
    const started = performance.now();
    const total = rate * SECONDS;
    // Publish in 10 ms ticks at the rate, concurrently within a tick (as several relays would).
    for (let tick = 0; ids.length < total; tick++) {
      const due = Math.min(total, Math.round(((tick + 1) * rate) / 100));
      const batch: Array<Promise<unknown>> = [];
      while (ids.length < due) {
        const id = newId("event");
        ids.push(id);
        batch.push(bus.publish(eventSubject("message.received"), event(id), { msgId: id }));
      }
      await Promise.all(batch);
      const wait = started + (tick + 1) * 10 - performance.now();
      if (wait > 0) await sleep(wait);
    }
    const pushed = performance.now();
    for (const deadline = Date.now() + 60_000; Date.now() < deadline && !ids.every((id) => arrivals.has(id)); ) await sleep(20);
    const done = performance.now();
    const after = await readCpu();
    await sleep(1_500);
    await db.query(`SELECT pg_stat_clear_snapshot()`);
    const statements = (await commits()) - commitsBefore;
    const u = used(before, after);
    const delivered = ids.filter((id) => arrivals.has(id)).length;
    rows.push(
      `| ${rate} | ${load} | ${Math.round(total / ((pushed - started) / 1000))} | ${delivered} / ${total} | ${Math.round(done - pushed)} | ` +
        `${((u.dispatcher / delivered) * 1000).toFixed(3)} | ${((u.postgres / delivered) * 1000).toFixed(3)} | ${(((u.dispatcher + u.postgres) / delivered) * 1000).toFixed(3)} | ${(statements / delivered).toFixed(3)} |`,
    );
    progress(rows[rows.length - 1]);
    await sleep(2_000);
  }

  await db.end();
  await bus.close();
  await stopChild(dispatcher.child);
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  await env.cleanup();
  return [
    `One webhook, \`message.received\` events published to JetStream at the rate for ${SECONDS} s; dispatcher from ${root}. CPU ms per delivery.`,
    "",
    "| events /s | 1-min load | published /s | delivered | last delivery after last publish ms | dispatcher | its Postgres | both | transactions per delivery |",
    "|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}
