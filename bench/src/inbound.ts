/**
 * `npm run bench -- inbound`: the inbound path at the network's rates, through
 * the public paths only. Signed `POST /provider/webhooks` batches go into the
 * gateway; the integrator's webhook receiver (a worker thread of this process, receiver-thread.ts) measures push →
 * delivery. Every service is its own process, as under `npm start`:
 * gateway → JetStream → messaging → contacts → outbox → JetStream →
 * webhook-dispatcher → receiver.
 *
 * Before them: each contact writes once, then BENCH_WARMUP_SECONDS (10) at the
 * first inbound rate, neither measured.
 *
 * Phases (issue 12):
 * 1. inbound text messages from 1,000 distinct contacts, in batches of 1 to 10
 *    as the network sends them, at 500 and 1,000 per second
 *    (BENCH_INBOUND_RATES) for BENCH_INBOUND_SECONDS (20) each;
 * 2. status callbacks (`sent`, `delivered`, `read`, in batches of 1 to 10) for
 *    messages sent through the API before the measurement, at 1,500 and 3,000
 *    per second (BENCH_STATUS_RATES) for BENCH_STATUS_SECONDS (20) each.
 * Targets: delivered-to-webhook rate equal to the pushed rate, p99 push →
 * delivery under 250 ms, provider webhook answer p99 under 50 ms, total CPU
 * of all processes under 0.5 ms per inbound message and 0.25 ms per status
 * callback. The CPU is counted from the first push until the last delivery
 * (or the drain deadline), per process; Postgres counts only the backends of
 * this run's database (the server's background processes and NATS are
 * shared with whatever else runs on the machine and are listed apart).
 *
 * Then, with the services stopped, the floor bench's hops (`floor.ts`, about a
 * minute and a half; BENCH_INBOUND_FLOOR=0 skips it): the same run's reference
 * (bare express + 1 INSERT) and the least CPU the architecture's hops cost per
 * inbound message and per status callback, so each phase's CPU is also given
 * as a multiple of that floor, which a slow phase of the machine moves much
 * less than the absolute figure.
 */
import { createHmac } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { Client } from "pg";
import { Pool } from "undici";
import { startSimulator } from "@platform/provider-simulator";
import { freePort } from "@platform/stack";
import { createTestEnvironment } from "@platform/testing";
import { measureFloor, type Floor } from "./floor";
import { startReceiverThread } from "./receiver-thread";
import { cpuSeconds, startChild, stopChild, syscallCounts } from "./lib";

const CONTACTS = 1_000;
/** Any 2xx answer of POST /api/v1/messages is an accepted send. */
const SEND_STATUS = 0;
const APP_SECRET = "bench-app-secret";
const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const list = (name: string, dflt: string) => (process.env[name] ?? dflt).split(",").map(Number).filter((n) => n > 0);
const INBOUND_RATES = list("BENCH_INBOUND_RATES", "500,1000");
const INBOUND_SECONDS = num("BENCH_INBOUND_SECONDS", 20);
const STATUS_RATES = list("BENCH_STATUS_RATES", "1500,3000");
const STATUS_SECONDS = num("BENCH_STATUS_SECONDS", 20);
/** Seconds of no traffic measured before the phases (the stack's CPU at rest); 0 skips it. */
const IDLE_SECONDS = num("BENCH_IDLE_SECONDS", 10);
/** Unmeasured traffic at the first inbound rate before the phases (JIT, plans). */
const WARMUP_SECONDS = num("BENCH_WARMUP_SECONDS", 10);
/** How long after the last push deliveries may still arrive before the phase is declared lagging. */
const DRAIN_S = num("BENCH_DRAIN_SECONDS", 30);
const progress = (msg: string) => process.stderr.write(`[inbound bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

function percentile(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;
}

/** A small deterministic PRNG (mulberry32), so every run pushes the same batches. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Item = { key: string; entry: Record<string, unknown>; kind: "messages" | "statuses"; contact?: string };

/**
 * Pushes `items` at `rate` per second in signed batches of 1 to 10 (one
 * phone number id, one change), as the network does; returns when the last
 * answer came. Push time per delivery key, answer latencies.
 */
async function push(
  gatewayUrl: string,
  phoneNumberId: string,
  items: Item[],
  rate: number,
  rand: () => number,
  pushedAt: Map<string, number>,
): Promise<{ answers: number[]; non200: number; firstPush: number; lastPush: number }> {
  // A keep-alive pool, as the network's senders keep their connections (not `fetch`: a Response, its streams and
  // signals per push cost the bench's own loop more than the request does).
  const gateway = new Pool(gatewayUrl, { connections: 256, keepAliveTimeout: 30_000 });
  const answers: number[] = [];
  let non200 = 0;
  const inflight = new Set<Promise<void>>();
  const t0 = now();
  let i = 0;
  let lastPush = t0;
  while (i < items.length) {
    const due = Math.min(items.length, Math.floor(((now() - t0) / 1000) * rate));
    while (i < due) {
      const size = Math.min(items.length - i, 1 + Math.floor(rand() * 10));
      const batch = items.slice(i, i + size);
      i += size;
      const value: Record<string, unknown> = { messaging_product: "whatsapp", metadata: { display_phone_number: "14155550100", phone_number_id: phoneNumberId } };
      const msgs = batch.filter((b) => b.kind === "messages");
      const sts = batch.filter((b) => b.kind === "statuses");
      if (msgs.length) {
        value.messages = msgs.map((b) => b.entry);
        value.contacts = msgs.map((b) => ({ wa_id: b.contact, profile: { name: `Contact ${b.contact}` } }));
      }
      if (sts.length) value.statuses = sts.map((b) => b.entry);
      const body = JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "waba-bench", changes: [{ field: "messages", value }] }] });
      const signature = `sha256=${createHmac("sha256", APP_SECRET).update(body).digest("hex")}`;
      const sent = now();
      lastPush = sent;
      for (const b of batch) pushedAt.set(b.key, sent);
      const p: Promise<void> = gateway
        .request({ path: "/provider/webhooks", method: "POST", headers: { "content-type": "application/json", "x-hub-signature-256": signature }, body })
        .then(async (res) => {
          await res.body.dump();
          answers.push(now() - sent);
          if (res.statusCode !== 200) non200++;
        })
        .catch(() => {
          non200++;
        })
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await sleep(2);
  }
  await Promise.all(inflight);
  await gateway.close();
  return { answers, non200, firstPush: t0, lastPush };
}

type CpuReading = Record<string, Record<string, number>>;

/**
 * This machine's Postgres runs with `autovacuum = off` (a CI setting of the sandbox, conf.d/90-ci.conf); every
 * production server vacuums. Without it the queue tables of the pipeline (outboxes, delivery jobs: a row inserted and
 * deleted per event) and `messages` (a row version per status) keep every dead row of the run, and each scan of their
 * indexes steps over more of them as a phase goes on. Where the server's autovacuum is off, this loop does its work on
 * this run's database with autovacuum's default rules (vacuum past 50 + 20 % dead rows, analyze past 50 + 10 % changed
 * rows), checked every BENCH_AUTOVACUUM_MS (default: the server's `autovacuum_naptime`, as autovacuum visits a database;
 * 0 turns it off). Its backend is one of this database's, so its CPU counts in "postgres (this db)" like the rest of
 * the pipeline's.
 */
async function standInAutovacuum(databaseUrl: string): Promise<{ stop(): Promise<void>; runs: () => { vacuums: number; analyzes: number } }> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  const settings = new Map(
    (await client.query<{ name: string; setting: string }>(`SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'autovacuum_naptime')`)).rows.map((r) => [r.name, r.setting]),
  );
  const on = settings.get("autovacuum") === "on";
  // As often as autovacuum would visit this database: once per naptime (60 s by default).
  const everyMs = num("BENCH_AUTOVACUUM_MS", Number(settings.get("autovacuum_naptime") ?? 60) * 1000);
  let vacuums = 0;
  let analyzes = 0;
  let stopped = everyMs <= 0 || on;
  // Naps that `stop()` cuts short.
  const naps = new AbortController();
  const loop = (async () => {
    while (!stopped) {
      await delay(everyMs, undefined, { signal: naps.signal }).catch(() => undefined);
      if (stopped) break;
      try {
        const { rows } = await client.query<{ name: string; vacuum: boolean; analyze: boolean }>(
          `SELECT format('%I.%I', schemaname, relname) AS name,
                  n_dead_tup > 50 + 0.2 * greatest(n_live_tup, 0) AS vacuum,
                  n_mod_since_analyze > 50 + 0.1 * greatest(n_live_tup, 0) AS analyze
             FROM pg_stat_user_tables`,
        );
        for (const r of rows) {
          if (stopped) break;
          if (r.vacuum) {
            await client.query(`VACUUM ${r.name}`);
            vacuums++;
          }
          if (r.analyze) {
            await client.query(`ANALYZE ${r.name}`);
            analyzes++;
          }
        }
      } catch {
        /* a table dropped or locked meanwhile: next round */
      }
    }
  })();
  return {
    runs: () => ({ vacuums, analyzes }),
    async stop() {
      stopped = true;
      naps.abort();
      await loop;
      await client.end();
    },
  };
}

export async function run(): Promise<string> {
  const phases = await runPhases();
  progress(process.env.BENCH_INBOUND_FLOOR === "0" ? "floor skipped (BENCH_INBOUND_FLOOR=0)" : "the hops' floor (floor bench), services stopped");
  const floor = process.env.BENCH_INBOUND_FLOOR === "0" ? undefined : await measureFloor();
  return phases.text(floor);
}

/** The phases, services running; the report's text is made once the floor is known. */
async function runPhases(): Promise<{ text: (floor: Floor | undefined) => string }> {
  const env = await createTestEnvironment("benchinb");
  const sim = await startSimulator({ accessToken: "bench-token", autoStatuses: false, maxRecordedRequests: 1_000 });
  const receiver = await startReceiverThread();
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
  const contacts = await startChild(path.join(root, "services/contacts/dist/index.js"), [], { ...baseEnv, LOG_LEVEL: "info" }, /listening/);
  const messaging = await startChild(
    path.join(root, "services/messaging/dist/index.js"),
    [],
    { ...baseEnv, LOG_LEVEL: "info", PROVIDER_BASE_URL: sim.url, PROVIDER_ACCESS_TOKEN: "bench-token" },
    /listening/,
  );
  const dispatcher = await startChild(
    path.join(root, "services/webhook-dispatcher/dist/index.js"),
    [],
    { ...baseEnv, LOG_LEVEL: "info", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" },
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
      PROVIDER_APP_SECRET: APP_SECRET,
      MESSAGING_URL: `http://127.0.0.1:${messaging.port}`,
      CONTACTS_URL: `http://127.0.0.1:${contacts.port}`,
      WEBHOOK_DISPATCHER_URL: `http://127.0.0.1:${dispatcher.port}`,
    },
    /gateway listening/,
  );
  const db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
  const dbName = new URL(env.databaseUrl).pathname.slice(1);
  const autovacuum = await standInAutovacuum(env.databaseUrl);
  const services = { gateway: gateway.child.pid, messaging: messaging.child.pid, contacts: contacts.child.pid, dispatcher: dispatcher.child.pid };

  /** Per-process CPU seconds: the services, this run's Postgres backends, the shared Postgres background and NATS, this process. */
  const readCpu = async (): Promise<CpuReading> => {
    const { rows } = await db.query<{ pid: number; datname: string | null; backend_type: string }>(
      `SELECT pid, datname, backend_type FROM pg_stat_activity`,
    );
    const pids: Record<string, number | undefined> = { ...services, "load+receiver": process.pid };
    for (const r of rows) {
      if (r.datname === dbName) pids[`pg:${r.pid}`] = r.pid;
      else if (r.backend_type !== "client backend") pids[`pgbg:${r.pid}`] = r.pid;
    }
    return cpuSeconds(pids, ["nats-server"]);
  };
  const cpuUsed = (before: CpuReading, after: CpuReading): Record<string, number> => {
    const groups: Record<string, number> = {};
    for (const [name, byPid] of Object.entries(after)) {
      const group = name.startsWith("pg:") ? "postgres (this db)" : name.startsWith("pgbg:") ? "postgres background (shared)" : name === "nats-server" ? "nats (shared)" : name;
      for (const [pid, cpu] of Object.entries(byPid)) groups[group] = (groups[group] ?? 0) + Math.max(0, cpu - (before[name]?.[pid] ?? 0));
    }
    return groups;
  };
  /**
   * What the CPU went to, in counts: system calls per process (the services' and this run's Postgres backends
   * together) and the transactions committed in this run's database. On this VM a socket write costs more than most
   * handlers, so these explain the CPU figures.
   */
  type Counts = { syscalls: Record<string, { reads: number; writes: number }>; commits: number };
  const readCounts = async (): Promise<Counts> => {
    const { rows } = await db.query<{ pid: number; datname: string | null; commits: string | null }>(
      `SELECT a.pid, a.datname, d.xact_commit::text AS commits FROM pg_stat_activity a LEFT JOIN pg_stat_database d ON d.datname = a.datname`,
    );
    const pids: Record<string, number | undefined> = { ...services };
    let commits = 0;
    for (const r of rows) {
      if (r.datname !== dbName) continue;
      pids[`pg:${r.pid}`] = r.pid;
      commits = Number(r.commits);
    }
    return { syscalls: await syscallCounts(pids), commits };
  };
  const countsLine = (before: Counts, after: Counts, count: number, unit: string): string => {
    const groups: Record<string, { reads: number; writes: number }> = {};
    for (const [name, c] of Object.entries(after.syscalls)) {
      const group = name.startsWith("pg:") ? "postgres (this db)" : name;
      const b = before.syscalls[name] ?? { reads: 0, writes: 0 };
      const g = (groups[group] ??= { reads: 0, writes: 0 });
      g.reads += Math.max(0, c.reads - (Number.isFinite(b.reads) ? b.reads : 0)) || 0;
      g.writes += Math.max(0, c.writes - (Number.isFinite(b.writes) ? b.writes : 0)) || 0;
    }
    const per = (n: number) => (n / count).toFixed(2);
    return (
      `system calls per ${unit} (read / write): ${Object.entries(groups).map(([k, v]) => `${k} ${per(v.reads)} / ${per(v.writes)}`).join(", ")}; ` +
      `transactions committed per ${unit}: ${per(after.commits - before.commits)}.`
    );
  };
  /**
   * BENCH_STATEMENTS=1, on a server that loads pg_stat_statements (with `pg_stat_statements.track_planning` for the
   * planning column): per phase, the statements of this run's database by time, planning and execution apart.
   */
  const statements = process.env.BENCH_STATEMENTS === "1" && (await db.query(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`).then(() => true, () => false));
  const statementLines = async (count: number, unit: string): Promise<string[]> => {
    const { rows } = await db.query<{ query: string; calls: string; plan_ms: number; exec_ms: number; rows: string }>(
      `SELECT regexp_replace(query, '[[:space:]]+', ' ', 'g') AS query, calls::text, total_plan_time AS plan_ms, total_exec_time AS exec_ms, rows::text
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_plan_time + total_exec_time DESC LIMIT 14`,
    );
    const per = (ms: number) => ((ms / count) * 1000).toFixed(1);
    return [
      `  - statements by time (µs per ${unit}: planning + execution; calls per ${unit}):`,
      ...rows.map((r) => `    - ${per(r.plan_ms)} + ${per(r.exec_ms)} µs, ${(Number(r.calls) / count).toFixed(3)} calls: \`${r.query.slice(0, 110)}\``),
    ];
  };
  const cpuLine = (used: Record<string, number>, count: number, unit: string): { line: string; total: number } => {
    const ours = ["gateway", "messaging", "contacts", "dispatcher", "postgres (this db)"];
    const total = ours.reduce((s, k) => s + (used[k] ?? 0), 0);
    const withShared = total + (used["nats (shared)"] ?? 0);
    const parts = Object.entries(used).map(([k, v]) => `${k} ${((v / count) * 1000).toFixed(3)}`);
    return {
      total: (withShared / count) * 1000,
      line: `CPU ms per ${unit}: ${parts.join(", ")}; services + this db's Postgres ${((total / count) * 1000).toFixed(3)}, with NATS ${((withShared / count) * 1000).toFixed(3)}.`,
    };
  };

  try {
    const url = `http://127.0.0.1:${gatewayPort}`;
    const admin = { authorization: `Bearer ${adminToken}`, "content-type": "application/json" };
    const post = async <T>(p: string, body: unknown, headers: Record<string, string> = admin, expect = 201): Promise<T> => {
      const res = await fetch(url + p, { method: "POST", headers, body: JSON.stringify(body) });
      if (expect ? res.status !== expect : !res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    };
    const org = (await post<{ id: string }>(`/admin/v1/organizations`, { name: "bench", rateLimit: { perSecond: 1_000_000, burst: 1_000_000 } })).id;
    const key = (await post<{ key: string }>(`/admin/v1/organizations/${org}/api-keys`, { name: "bench" })).key;
    const phoneNumberId = `bench-pn-${env.namespace}`;
    const channel = await post<{ id: string }>(`/admin/v1/organizations/${org}/channels`, {
      name: "bench",
      phoneNumber: "+14155550100",
      providerPhoneNumberId: phoneNumberId,
      messagesPerSecond: 1000,
    });
    await post(`/admin/v1/organizations/${org}/webhooks`, { url: receiver.url, events: ["message.received", "message.delivered", "message.read"] });
    const contactsWa = Array.from({ length: CONTACTS }, (_, i) => `1628${String(3_000_000 + i).padStart(7, "0")}`);
    const rand = prng(12);
    /** Each phase's row (its last cell, the CPU, is filled in at the end: the floor's multiple comes after the phases). */
    const rows: Array<{ cells: string; cpuMs: number; unit: string }> = [];
    const cpuLines: string[] = [];
    const loads: string[] = [];
    let seq = 0;

    const measure = async (label: string, rate: number, seconds: number, items: Item[], expectKeys: string[], unit: string, count: number) => {
      const pushedAt = new Map<string, number>();
      loads.push(`${label}: ${os.loadavg()[0].toFixed(1)}`);
      if (statements) await db.query(`SELECT pg_stat_statements_reset()`);
      const cpuBefore = await readCpu();
      const countsBefore = await readCounts();
      const lag = monitorEventLoopDelay({ resolution: 5 });
      lag.enable();
      const pushed = await push(url, phoneNumberId, items, rate, rand, pushedAt);
      const deadline = now() + DRAIN_S * 1000;
      while (now() < deadline && expectKeys.some((k) => !receiver.arrivals.has(k))) await sleep(50);
      const end = now();
      lag.disable();
      const cpuAfter = await readCpu();
      const countsAfter = await readCounts();
      const latencies: number[] = [];
      let lastArrival = 0;
      let missing = 0;
      const missingByType = new Map<string, number>();
      for (const k of expectKeys) {
        const at = receiver.arrivals.get(k);
        if (at === undefined) {
          missing++;
          const type = k.slice(0, k.indexOf("|"));
          missingByType.set(type, (missingByType.get(type) ?? 0) + 1);
          continue;
        }
        latencies.push(at - pushedAt.get(k)!);
        lastArrival = Math.max(lastArrival, at);
      }
      latencies.sort((a, b) => a - b);
      const answers = pushed.answers.sort((a, b) => a - b);
      const pushSeconds = (pushed.lastPush - pushed.firstPush) / 1000;
      const outSeconds = ((lastArrival || end) - pushed.firstPush) / 1000;
      const cpu = cpuLine(cpuUsed(cpuBefore, cpuAfter), count, unit);
      rows.push({
        cells:
          `| ${label} | ${rate} | ${Math.round(count / pushSeconds)} | ${Math.round(latencies.length / outSeconds)} | ${latencies.length} / ${expectKeys.length} (${missing} missing) | ` +
          `${Math.round(percentile(latencies, 0.5))} | ${Math.round(percentile(latencies, 0.99))} | ${Math.round(((lastArrival || end) - pushed.lastPush))} | ` +
          `${percentile(answers, 0.5).toFixed(1)} / ${percentile(answers, 0.99).toFixed(1)} | ${pushed.non200} |`,
        cpuMs: cpu.total,
        unit,
      });
      const lagMs = (q: number) => (lag.percentile(q) / 1e6).toFixed(1);
      cpuLines.push(
        `- ${label} at ${rate}/s: ${cpu.line}`,
        `  - ${countsLine(countsBefore, countsAfter, count, unit)}`,
        `  - the bench's own event loop (load and receiver; its delays are in every latency above): delay p50 ${lagMs(50)}, p99 ${lagMs(99)}, max ${(lag.max / 1e6).toFixed(1)} ms.`,
      );
      if (statements) cpuLines.push(...(await statementLines(count, unit)));
      if (missing > 0) {
        // A `delivered` overtaken by its `read` (batches are consumed concurrently) is rightly never emitted: count those apart.
        const overtaken =
          unit === "status callback"
            ? (
                await db.query(
                  `SELECT count(*)::int AS n FROM messaging.messages WHERE direction = 'outbound' AND status = 'read' AND provider_message_id = ANY($1)`,
                  [expectKeys.filter((k) => k.startsWith("message.delivered|") && !receiver.arrivals.has(k)).map((k) => k.slice(k.indexOf("|") + 1))],
                )
              ).rows[0].n
            : 0;
        cpuLines.push(
          `  - not delivered within the drain: ${[...missingByType].map(([t, n]) => `${t} ${n}`).join(", ")}` +
            (unit === "status callback" ? ` (of the delivered ones, ${overtaken} are read: their read overtook them, so no delivered event is due)` : ""),
        );
      }
      progress(`${label} ${rate}/s: ${latencies.length}/${expectKeys.length} delivered, p99 ${Math.round(percentile(latencies, 0.99))} ms, answer p99 ${percentile(answers, 0.99).toFixed(1)} ms`);
    };

    // Warm-up: every contact writes once (creates the contacts and opens their service windows), not measured.
    const inbound = (n: number, tag: string): { items: Item[]; keys: string[] } => {
      const items: Item[] = [];
      for (let j = 0; j < n; j++) {
        const wa = contactsWa[Math.floor(rand() * CONTACTS)];
        const id = `wamid.in.${tag}.${env.namespace}.${seq++}`;
        items.push({
          key: `message.received|${id}`,
          kind: "messages",
          contact: wa,
          entry: { from: wa, id, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: `hello ${j}` } },
        });
      }
      return { items, keys: items.map((x) => x.key) };
    };
    /** Pushes inbound messages nobody measures and waits until every one is delivered. */
    const unmeasured = async (items: Item[], rate: number) => {
      await push(url, phoneNumberId, items, rate, rand, new Map());
      const start = now();
      while (items.some((x) => !receiver.arrivals.has(x.key))) {
        if (now() - start > 120_000) throw new Error("warm-up inbound messages not delivered");
        await sleep(200);
      }
    };
    progress("warm-up: 1,000 contacts write once");
    await unmeasured(
      contactsWa.map((wa, j) => {
        const id = `wamid.in.warm.${env.namespace}.${j}`;
        return { key: `message.received|${id}`, kind: "messages", contact: wa, entry: { from: wa, id, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "hi" } } };
      }),
      300,
    );
    // Then the first phase's traffic, unmeasured, so that no phase pays for the services' JIT compilation and first
    // plans (the services under test run warm in production).
    if (WARMUP_SECONDS > 0 && INBOUND_RATES.length > 0) {
      progress(`warm-up: ${WARMUP_SECONDS} s at ${INBOUND_RATES[0]}/s, not measured`);
      await unmeasured(inbound(INBOUND_RATES[0] * WARMUP_SECONDS, "warm2").items, INBOUND_RATES[0]);
    }

    // The stack at rest: what each process burns per second with no traffic (timers, polls, broadcasts). Every
    // phase's CPU per op includes its share of this over the phase's seconds.
    if (IDLE_SECONDS > 0) {
      await sleep(2_000);
      const before = await readCpu();
      await sleep(IDLE_SECONDS * 1000);
      const used = cpuUsed(before, await readCpu());
      cpuLines.push(
        `- at rest (${IDLE_SECONDS} s, no traffic), CPU ms per second: ${Object.entries(used)
          .map(([k, v]) => `${k} ${((v / IDLE_SECONDS) * 1000).toFixed(1)}`)
          .join(", ")}.`,
      );
    }

    for (const rate of INBOUND_RATES) {
      const { items, keys } = inbound(rate * INBOUND_SECONDS, `r${rate}`);
      await measure("inbound messages", rate, INBOUND_SECONDS, items, keys, "inbound message", items.length);
      await sleep(2_000);
    }

    /** Row updates of `messaging.messages` so far, and how many were HOT (no index entry written). */
    const messageUpdates = async (): Promise<{ upd: number; hot: number }> => {
      const { rows } = await db.query<{ upd: string; hot: string }>(
        `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE schemaname = 'messaging' AND relname = 'messages'`,
      );
      return { upd: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
    };

    // Status callbacks: first send the messages (through the API), then push sent/delivered/read for them.
    const used = new Set<string>();
    const apiHeaders = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    for (const rate of STATUS_RATES) {
      const messages = Math.ceil((rate * STATUS_SECONDS) / 3);
      progress(`sending ${messages} messages for the ${rate}/s status phase`);
      let next = 0;
      const sendOne = async (): Promise<void> => {
        while (next < messages) {
          const j = next++;
          await post(`/api/v1/messages`, { to: `+${contactsWa[j % CONTACTS]}`, text: `out ${j}`, messagingChannelId: channel.id }, apiHeaders, SEND_STATUS);
        }
      };
      await Promise.all(Array.from({ length: 32 }, sendOne));
      const sendStart = now();
      let sent: Array<{ provider_message_id: string; phone: string }> = [];
      for (;;) {
        ({ rows: sent } = await db.query(
          `SELECT provider_message_id, phone FROM messaging.messages
            WHERE direction = 'outbound' AND status = 'sent' AND provider_message_id IS NOT NULL AND NOT (provider_message_id = ANY($1)) ORDER BY created_at`,
          [[...used]],
        ));
        if (sent.length >= messages || now() - sendStart > 60_000) break;
        await sleep(200);
      }
      // Blocks of 200 messages: their `sent`, then their `delivered`, then their `read` callbacks.
      const items: Item[] = [];
      const keys: string[] = [];
      const ts = String(Math.floor(Date.now() / 1000));
      for (let b = 0; b < sent.length; b += 200) {
        const block = sent.slice(b, b + 200);
        for (const status of ["sent", "delivered", "read"] as const) {
          for (const m of block) {
            items.push({ key: `message.${status}|${m.provider_message_id}`, kind: "statuses", entry: { id: m.provider_message_id, status, timestamp: ts, recipient_id: m.phone.slice(1) } });
            if (status !== "sent") keys.push(`message.${status}|${m.provider_message_id}`);
          }
        }
      }
      const updatesBefore = await messageUpdates();
      await measure("status callbacks", rate, STATUS_SECONDS, items, keys, "status callback", items.length);
      for (const m of sent) used.add(m.provider_message_id);
      await sleep(2_000);
      const updatesAfter = await messageUpdates();
      cpuLines.push(
        `- status callbacks at ${rate}/s: \`messaging.messages\` updates ${updatesAfter.upd - updatesBefore.upd}, of them HOT ${updatesAfter.hot - updatesBefore.hot} (pg_stat_user_tables, flushed up to a second late).`,
      );
    }

    return {
      text: (floor: Floor | undefined) => [
      `Signed \`POST /provider/webhooks\` batches of 1 to 10 (deterministic PRNG) into the gateway, one channel, ${CONTACTS} contacts; the integrator's`,
      `receiver (a worker thread of the bench process; the pushes go through a keep-alive pool from its main thread) subscribes to message.received / .delivered / .read. Inbound phases ${INBOUND_SECONDS} s after an unmeasured warm-up of ${WARMUP_SECONDS} s at the first rate, status phases ${STATUS_SECONDS} s,`,
      `drain up to ${DRAIN_S} s. Status phases push sent, delivered and read for messages sent through the API before the phase (blocks of 200);`,
      `the \`sent\` callbacks find the message already sent (no event), so deliveries expected = 2/3 of the callbacks.`,
      `1-min load average at each phase's start: ${loads.join("; ")}. ${os.cpus().length} cores.`,
      "",
      floor
        ? `Same run, after the phases with the services stopped: bare express + 1 INSERT ${floor.reference} req/s (16 connections); the hops' floor ` +
          `(\`npm run bench -- floor\`) at least ${floor.inbound.toFixed(3)} ms per inbound message and ${floor.status.toFixed(3)} ms per status callback.`
        : "The hops' floor was not measured (BENCH_INBOUND_FLOOR=0).",
      "",
      "| phase | target /s | pushed /s | delivered /s | delivered / expected | p50 ms push→delivery | p99 ms | last delivery after last push ms | answer p50 / p99 ms | non-200 | CPU ms per op, all with NATS (× the floor) |",
      "|---|---|---|---|---|---|---|---|---|---|---|",
      ...rows.map((r) => {
        const bound = !floor ? undefined : r.unit === "inbound message" ? floor.inbound : floor.status;
        return `${r.cells} ${r.cpuMs.toFixed(2)}${bound ? ` (${(r.cpuMs / bound).toFixed(1)}×)` : ""} |`;
      }),
      "",
      `Duplicate deliveries seen by the receiver: ${receiver.duplicates()}. Stand-in autovacuum (this server's is off; 0 when it is on or BENCH_AUTOVACUUM_MS=0): ` +
        `${autovacuum.runs().vacuums} vacuums, ${autovacuum.runs().analyzes} analyzes of this run's tables.`,
      "",
      ...cpuLines,
    ].join("\n"),
    };
  } finally {
    await autovacuum.stop();
    await db.end();
    await stopChild(gateway.child);
    await stopChild(dispatcher.child);
    await stopChild(messaging.child);
    await stopChild(contacts.child);
    await sim.close();
    await receiver.close();
    await env.cleanup();
  }
}
