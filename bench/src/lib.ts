import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { Client } from "pg";
import { Bus } from "@platform/bus";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startSimulator } from "@platform/provider-simulator";
import { createTestEnvironment } from "@platform/testing";
import readline from "node:readline";
import autocannon from "autocannon";
import { SERVICE_NODE_ARGS } from "@platform/stack";

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  total: number;
}

/** One autocannon run; latencies in ms. */
export async function load(opts: autocannon.Options): Promise<LoadResult> {
  const r = await autocannon({ connections: 50, duration: 5, ...opts });
  return {
    rps: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    total: r.requests.total,
  };
}

/** Starts a node script as a child and resolves once it printed a JSON line with `port` (or a line matching `ready`). */
export function startChild(script: string, args: string[], env: NodeJS.ProcessEnv, ready?: RegExp): Promise<{ child: ChildProcess; port?: number }> {
  return new Promise((resolve, reject) => {
    // BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") profiles the processes under test.
    const nodeArgs = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(" ").filter(Boolean) : [];
    const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, ...nodeArgs, script, ...args], { env, stdio: ["ignore", "pipe", "inherit"] });
    const rl = readline.createInterface({ input: child.stdout! });
    rl.on("line", (line) => {
      try {
        const rec = JSON.parse(line);
        if (ready ? ready.test(String(rec.msg)) : typeof rec.port === "number") resolve({ child, port: rec.port });
      } catch {
        /* not JSON */
      }
    });
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 5_000).unref();
  });
}

/** Resident set size of a process in MB (Linux /proc). */
export async function rssMb(pid: number | undefined): Promise<number> {
  if (!pid) return NaN;
  const { readFile } = await import("node:fs/promises");
  const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round(kb / 1024);
}

/** CPU seconds (user + system) used so far by the given pids, and by every process whose command name matches (per pid), from Linux /proc. */
export async function cpuSeconds(
  pids: Record<string, number | undefined>,
  commands: string[] = ["postgres", "nats-server"],
): Promise<Record<string, Record<string, number>>> {
  const { readFile, readdir } = await import("node:fs/promises");
  const tick = 100; // USER_HZ on Linux
  const read = async (pid: number | string): Promise<{ comm: string; cpu: number } | undefined> => {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    const close = stat.lastIndexOf(")");
    if (close < 0) return undefined;
    const comm = stat.slice(stat.indexOf("(") + 1, close);
    const fields = stat.slice(close + 2).split(" ");
    return { comm, cpu: (Number(fields[11]) + Number(fields[12])) / tick };
  };
  const out: Record<string, Record<string, number>> = {};
  for (const [name, pid] of Object.entries(pids)) {
    const r = pid ? await read(pid) : undefined;
    out[name] = { [String(pid)]: r?.cpu ?? NaN };
  }
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const r = await read(entry);
    if (r && commands.includes(r.comm)) (out[r.comm] ??= {})[entry] = r.cpu;
  }
  return out;
}

/** System calls that read and that write (Linux `/proc/<pid>/io` `syscr` / `syscw`) so far, per named pid. */
export async function syscallCounts(pids: Record<string, number | undefined>): Promise<Record<string, { reads: number; writes: number }>> {
  const { readFile } = await import("node:fs/promises");
  const out: Record<string, { reads: number; writes: number }> = {};
  for (const [name, pid] of Object.entries(pids)) {
    const io = pid ? await readFile(`/proc/${pid}/io`, "utf8").catch(() => "") : "";
    out[name] = { reads: Number(/syscr:\s+(\d+)/.exec(io)?.[1] ?? NaN), writes: Number(/syscw:\s+(\d+)/.exec(io)?.[1] ?? NaN) };
  }
  return out;
}

/**
 * Per-process CPU use between two `cpuSeconds` readings, as a markdown line.
 * Per pid, so that Postgres backends that start during the run count from 0;
 * the CPU of backends that exited meanwhile is not seen.
 */
export function cpuReport(before: Record<string, Record<string, number>>, after: Record<string, Record<string, number>>, seconds: number, count: number): string {
  const parts = Object.keys(after).map((k) => {
    let used = 0;
    for (const [pid, cpu] of Object.entries(after[k])) used += Math.max(0, cpu - (before[k]?.[pid] ?? 0));
    return `${k} ${Math.round((used / seconds) * 100)}% (${((used / count) * 1000).toFixed(2)} ms/req)`;
  });
  return `CPU by process: ${parts.join(", ")}.`;
}

/**
 * Messaging and contacts as their own processes on a fresh database and bus
 * namespace, the simulator in process, a bus client and a Postgres client,
 * and one channel of `rate` messages per second: the set-up of the benches
 * that drive messaging directly (template-yield, throttle-recovery).
 */
export async function startMessagingBench(label: string, rate: number) {
  const env = await createTestEnvironment(label);
  const sim = await startSimulator({ accessToken: "bench-token", autoStatuses: false, maxRecordedRequests: 500_000 });
  const baseEnv = {
    ...process.env,
    DATABASE_URL: env.databaseUrl,
    NATS_URL: env.natsUrl,
    BUS_NAMESPACE: env.namespace,
    INTERNAL_TOKEN: env.internalToken,
    PORT: "0",
    LOG_LEVEL: "info",
  };
  const root = path.resolve(__dirname, "../..");
  const contacts = await startChild(path.join(root, "services/contacts/dist/index.js"), [], baseEnv, /listening/);
  const messaging = await startChild(
    path.join(root, "services/messaging/dist/index.js"),
    [],
    { ...baseEnv, PROVIDER_BASE_URL: sim.url, PROVIDER_ACCESS_TOKEN: "bench-token" },
    /listening/,
  );
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: label, log: createLogger("bench", "silent") });
  const db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
  const stop = async () => {
    await db.end();
    await bus.close();
    await stopChild(messaging.child);
    await stopChild(contacts.child);
    await sim.close();
    await env.cleanup();
  };
  try {
    const url = `http://127.0.0.1:${messaging.port}`;
    const org = newId("organization");
    const headers = { "x-internal-token": env.internalToken, "x-organization-id": org, "content-type": "application/json" };
    const chRes = await fetch(`${url}/admin/v1/organizations/${org}/channels`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: "bench", phoneNumber: "+14155551000", providerPhoneNumberId: `bench-pn-${env.namespace}`, messagesPerSecond: rate }),
    });
    if (chRes.status !== 201) throw new Error(`channel create: ${chRes.status} ${await chRes.text()}`);
    const channel = (await chRes.json()) as { id: string; providerPhoneNumberId: string };
    return { env, sim, contacts, messaging, bus, db, url, org, headers, channel, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
