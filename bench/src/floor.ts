/**
 * `npm run bench -- floor`: what the hops that the architecture requires cost on this machine, with none of our code
 * (issue 12). The inbound path is fixed (provider → gateway → JetStream → messaging ⇄ contacts, Postgres → outbox →
 * JetStream → dispatcher → the integrator's receiver), so each message pays at least for its share of those hops.
 * Each hop is measured alone with the bare libraries we use (node:http, undici, nats, pg), its two ends in their own
 * processes (`floor-child.ts`), at BENCH_FLOOR_RATE (1,000) operations per second for BENCH_FLOOR_SECONDS (8), CPU
 * read from /proc: both ends, NATS, and the Postgres backends of this run's database. From those the cheapest
 * possible CPU per inbound message and per status callback follows (the last lines), to compare with the issue's
 * targets and with what `npm run bench -- inbound` measures.
 *
 * The reference of the same run, to tell a slow phase of the machine: the messages bench's bare express app doing
 * one INSERT per request (req/s at 16 connections).
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import readline from "node:readline";
import { connect, RetentionPolicy, StorageType } from "nats";
import { Client } from "pg";
import { createTestEnvironment } from "@platform/testing";
import { cpuSeconds, load, startChild, stopChild } from "./lib";

const RATE = Number(process.env.BENCH_FLOOR_RATE ?? 1_000);
const SECONDS = Number(process.env.BENCH_FLOOR_SECONDS ?? 8);
/** Messages per provider batch in the inbound bench (1 to 10, uniform). */
const PER_BATCH = 5.5;
const progress = (msg: string) => process.stderr.write(`[floor bench] ${msg}\n`);

type Proc = { child: ChildProcess; first: Promise<Record<string, unknown>>; last: Promise<Record<string, unknown>> };

/** A floor-child process: resolves `first` with its first JSON line (port or ready) and `last` with the one it prints on finishing. */
function role(name: string, args: Array<string | number>): Proc {
  const child = spawn(process.execPath, [path.join(__dirname, "floor-child.js"), name, ...args.map(String)], { stdio: ["ignore", "pipe", "inherit"] });
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  readline.createInterface({ input: child.stdout! }).on("line", (line) => {
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
      waiters.splice(0).forEach((w) => w());
    } catch {
      /* not ours */
    }
  });
  const nth = (n: number) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => (lines.length > n ? resolve(lines[n]) : waiters.push(check));
      child.once("exit", (code) => (lines.length > n ? resolve(lines[n]) : reject(new Error(`floor-child ${name} exited with ${code}`))));
      check();
    });
  const proc = { child, first: nth(0), last: nth(1) };
  // A server is killed without a last line: nobody waits for it then.
  proc.first.catch(() => undefined);
  proc.last.catch(() => undefined);
  return proc;
}

type Cost = Record<string, number>;
type Row = { hop: string; per: string; cost: Cost; done: number };

/** What `measureFloor` found: each hop's cost, the same run's reference, and the lower bounds per operation (ms). */
export interface Floor {
  rows: Row[];
  /** Bare express + 1 INSERT, req/s at 16 connections. */
  reference: number;
  /** The gateway's side of one HTTP request, the cheapest JetStream message, the dispatcher's side of one HTTP request, one request/reply. */
  serve: number;
  js: number;
  call: number;
  rpc: number;
  /** What every provider batch pays (serve + js) and every delivered event (js + call). */
  perBatch: number;
  perEvent: number;
  /** At least this much CPU per inbound message and per status callback, all processes. */
  inbound: number;
  status: number;
}

/** `npm run bench -- floor`: the hops alone, then the bounds; the inbound bench runs it too (its "× the floor"). */
export async function run(): Promise<string> {
  return formatFloor(await measureFloor());
}

/** Measures every hop alone (about a minute and a half) and derives the least CPU per inbound message and status callback. */
export async function measureFloor(): Promise<Floor> {
  const env = await createTestEnvironment("floor");
  const db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
  const dbName = new URL(env.databaseUrl).pathname.slice(1);
  const nc = await connect({ servers: env.natsUrl });
  const jsm = await nc.jetstreamManager();
  // Named as the namespace's streams are, so that the environment's cleanup deletes it.
  const stream = `${env.namespace}_FLOOR`.toUpperCase();
  const subject = `floor.${env.namespace}.events`;
  // As the platform's event streams: file storage, limits retention, a duplicate window for the Nats-Msg-Id.
  await jsm.streams.add({ name: stream, subjects: [subject], storage: StorageType.File, retention: RetentionPolicy.Limits, duplicate_window: 120 * 1e9 });
  const procs: ChildProcess[] = [];

  /** CPU seconds of the named processes, NATS and this database's backends, per pid. */
  const readCpu = async (named: Record<string, number | undefined>) => {
    const { rows } = await db.query<{ pid: number; datname: string | null }>(`SELECT pid, datname FROM pg_stat_activity WHERE pid <> pg_backend_pid()`);
    const pids: Record<string, number | undefined> = { ...named };
    for (const r of rows) if (r.datname === dbName) pids[`pg:${r.pid}`] = r.pid;
    return cpuSeconds(pids, ["nats-server"]);
  };
  /** Milliseconds of CPU per operation, per process group, between two readings. */
  const costOf = (before: Awaited<ReturnType<typeof readCpu>>, after: Awaited<ReturnType<typeof readCpu>>, ops: number): Cost => {
    const out: Cost = {};
    for (const [name, byPid] of Object.entries(after)) {
      const group = name.startsWith("pg:") ? "postgres" : name === "nats-server" ? "nats" : name;
      for (const [pid, cpu] of Object.entries(byPid)) out[group] = (out[group] ?? 0) + Math.max(0, cpu - (before[name]?.[pid] ?? 0));
    }
    for (const k of Object.keys(out)) out[k] = (out[k] / ops) * 1000;
    return out;
  };
  /**
   * Runs one hop: servers first (until ready), then the client. Processes that finish by themselves (the client, the
   * consumer) report their own CPU over their operations; the rest (servers, NATS, Postgres) are read from /proc from
   * just before the client starts until everything finished.
   */
  const measure = async (hop: string, per: string, servers: Record<string, Proc>, client: { name: string; start: () => Proc }, finishers: string[] = [], last = true): Promise<Row> => {
    for (const p of Object.values(servers)) {
      procs.push(p.child);
      await p.first;
    }
    const running = Object.fromEntries(Object.entries(servers).filter(([k]) => !finishers.includes(k)).map(([k, p]) => [k, p.child.pid]));
    const before = await readCpu(running);
    const c = client.start();
    procs.push(c.child);
    const ended = await c.first;
    const reported: Record<string, Record<string, unknown>> = { [client.name]: ended };
    for (const f of finishers) reported[f] = await servers[f].last;
    const after = await readCpu(running);
    const done = Number(ended.done ?? 0);
    const cost = costOf(before, after, done);
    for (const [name, r] of Object.entries(reported)) cost[name] = Number(r.cpuMs) / done;
    c.child.kill("SIGTERM");
    if (last) for (const p of Object.values(servers)) p.child.kill("SIGTERM");
    progress(`${hop}: ${done} done, ${Object.entries(cost).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ")} ms/op`);
    return { hop, per, cost, done };
  };
  const rows: Row[] = [];
  let reference = NaN;
  try {
    // Reference first (it also warms Postgres up).
    const bare = await startChild(path.join(__dirname, "bare-server.js"), ["insert"], { ...process.env, DATABASE_URL: env.databaseUrl });
    procs.push(bare.child);
    let n = 0;
    const bareRequest = {
      method: "POST" as const,
      path: "/api/v1/messages",
      headers: { "content-type": "application/json" },
      setupRequest: (req: object) => ({ ...req, body: JSON.stringify({ to: "+14155550100", text: `bare ${n++}` }) }),
    };
    await load({ url: `http://127.0.0.1:${bare.port}`, connections: 16, duration: 2, requests: [bareRequest] });
    reference = (await load({ url: `http://127.0.0.1:${bare.port}`, connections: 16, duration: 3, requests: [bareRequest] })).rps;
    await stopChild(bare.child);
    progress(`bare express + 1 INSERT: ${reference} req/s`);

    const total = Math.round(RATE * SECONDS);
    const server = role("http-server", []);
    const port = Number((await server.first).port);
    for (const burst of [1, 8]) {
      rows.push(
        await measure(`HTTP POST, keep-alive (undici → node:http), bursts of ${burst}`, "request", { server }, {
          name: "client",
          start: () => role("http-client", [`http://127.0.0.1:${port}`, RATE, SECONDS, burst]),
        }, [], burst === 8),
      );
    }

    for (const burst of [1, 8, 32]) {
      const sub = role("js-sub", [env.natsUrl, stream, `floor_${burst}`, total]);
      // Each consumer starts at the stream's first message: publish into a stream of this burst only.
      await jsm.streams.purge(stream);
      rows.push(
        await measure(`JetStream message: publish + ack, deliver + ack (bursts of ${burst})`, "message", { consumer: sub }, {
          name: "publisher",
          start: () => role("js-pub", [env.natsUrl, subject, RATE, SECONDS, burst]),
        }, ["consumer"]),
      );
    }

    const responder = role("req-server", [env.natsUrl, `floor.${env.namespace}.rpc`]);
    rows.push(await measure("NATS request/reply", "request", { responder }, { name: "requester", start: () => role("req-client", [env.natsUrl, `floor.${env.namespace}.rpc`, RATE, SECONDS]) }));

    for (const n of [1, 6]) {
      rows.push(await measure(`Postgres transaction: BEGIN, one INSERT of ${n} row${n > 1 ? "s" : ""}, COMMIT`, "transaction", {}, { name: "client", start: () => role("pg-tx", [env.databaseUrl, RATE, SECONDS, n]) }));
    }
  } finally {
    for (const c of procs) c.kill("SIGTERM");
    await nc.close();
    await db.end();
    await env.cleanup();
  }

  const [http1, http8, js1, js8, js32, rpc] = rows;
  // The cheapest shape of each hop: what no batching of ours can go below.
  const js = Math.min(sum(js1.cost), sum(js8.cost), sum(js32.cost));
  const serve = Math.min(http1.cost.server, http8.cost.server);
  const call = Math.min(http1.cost.client, http8.cost.client);
  // What every provider batch and every event must pay, whatever we batch: the gateway serves the batch's request and
  // stores it (one JetStream message); messaging asks contacts about its senders (inbound messages only); each event is
  // one JetStream message and one request to the receiver (its side not counted). Postgres is left out (it can be
  // grouped across batches and events), so this is a lower bound, not an estimate.
  const perBatch = serve + js;
  const perEvent = js + call;
  const inbound = (perBatch + sum(rpc.cost)) / PER_BATCH + perEvent;
  const status = perBatch / PER_BATCH + (2 / 3) * perEvent;
  return { rows, reference, serve, js, call, rpc: sum(rpc.cost), perBatch, perEvent, inbound, status };
}

const sum = (c: Cost) => Object.values(c).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);

/** The floor bench's report. */
export function formatFloor(f: Floor): string {
  const { rows, reference, serve, js, call, perBatch, perEvent, inbound, status } = f;
  const fmt = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? "–" : v.toFixed(3));
  const ends = (c: Cost) => Object.entries(c).map(([k, v]) => `${k} ${fmt(v)}`).join(", ");
  return [
    `Each hop alone, its ends in their own processes, ${RATE} per second for ${SECONDS} s; CPU in ms per operation (the ends that`,
    `finish by themselves report their own, the rest from /proc). Bare express + 1 INSERT (same run, 16 connections): ${reference} req/s.`,
    "",
    "| hop | per | CPU ms: each end, NATS, Postgres | sum |",
    "|---|---|---|---|",
    ...rows.map((r) => `| ${r.hop} | ${r.per} | ${ends(r.cost)} | ${fmt(sum(r.cost))} |`),
    "",
    `The least the inbound path can cost with these hops, each in its cheapest shape above, Postgres left out (it can be grouped across`,
    `batches and events), provider batches of ${PER_BATCH} messages on average as the inbound bench sends them:`,
    `- per provider batch: the gateway's side of one HTTP request ${fmt(serve)} + one JetStream message ${fmt(js)} = ${fmt(perBatch)} ms, and one request/reply to contacts ${fmt(f.rpc)} ms for inbound messages;`,
    `- per event delivered: one JetStream message ${fmt(js)} + the dispatcher's side of one HTTP request ${fmt(call)} = ${fmt(perEvent)} ms;`,
    `- **per inbound message at least ${fmt(inbound)} ms** (target 0.5); **per status callback** (two events for three callbacks) **at least ${fmt(status)} ms** (target 0.25).`,
    `One Postgres transaction (above) costs as much again as a JetStream message: each batch's writes, the outbox's and the deliveries' come on top.`,
  ].join("\n");
}
