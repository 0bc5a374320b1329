import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import readline from "node:readline";
import { Client } from "pg";
import { CONFIG_OK_MESSAGE, EXIT_CONFIG } from "@platform/config";

/**
 * Runs the whole stack as `npm start` does: every service its own OS process
 * (`node services/<name>/dist/index.js`, so it can be found and stopped like a
 * pod), restarted within a second when it dies, with one combined log, a
 * prefix per service. The end-to-end tests and benchmarks start it the same way.
 */
export const REPO_ROOT = path.resolve(__dirname, "../../..");

export interface StackOptions {
  port?: number;
  databaseUrl?: string;
  natsUrl?: string;
  namespace?: string;
  adminToken?: string;
  internalToken?: string;
  /** Extra env for every process (e.g. WEBHOOK_ALLOW_PRIVATE_TARGETS). */
  env?: Record<string, string>;
  /** Where log lines go; default stdout. */
  onLog?: (line: string) => void;
  pretty?: boolean;
  /** Off a terminal (`npm start`): the services' JSON log lines as they wrote them, without the `[name]` in front. */
  rawJson?: boolean;
  readyTimeoutMs?: number;
  /**
   * A process exited because its configuration is wrong (it printed one line
   * per bad variable): it is not restarted, and this is called once.
   */
  onConfigError?: (name: string) => void;
  /**
   * Internal to `checkConfiguration`: every process only checks its variables
   * (`CONFIG_CHECK_ONLY=1`) and exits; none is restarted, and this is called
   * once they all have, with whether any exited for a configuration error.
   */
  onChecked?: (ok: boolean) => void;
  /**
   * Copies of every service and of the gateway (default 1). With more than one,
   * processes are named `<name>-1`, `<name>-2`, …; each service's copies sit
   * behind a local TCP round-robin that the gateways call, and `url` is a
   * round-robin over the gateways (`gatewayUrls` reach each one).
   */
  replicas?: number;
}

interface Proc {
  name: string;
  script: string;
  env: Record<string, string>;
  child?: ChildProcess;
  restarts: number;
  /** Its configuration was judged: it said it is good (IPC) or it exited. */
  judged?: boolean;
}

/** How long a runner stopping on a bad variable waits for the other processes to judge their own. */
const CONFIG_VERDICT_WAIT_MS = 15_000;

export interface Stack {
  url: string;
  adminToken: string;
  internalToken: string;
  simulatorUrl?: string;
  env: Record<string, string>;
  /** Names of the processes (gateway, services, provider-simulator). */
  names(): string[];
  /** Each gateway's own URL (one per replica). */
  gatewayUrls: string[];
  /** The base URL of one process (its `/metrics`, `/readyz`), e.g. `serviceUrl("messaging")`. */
  serviceUrl(name: string): string | undefined;
  pid(name: string): number | undefined;
  restarts(name: string): number;
  /** Sends a signal to a process, as `kill` would; the supervisor restarts it. */
  kill(name: string, signal?: NodeJS.Signals): void;
  waitReady(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Ports this process has handed out; never handed out twice (see freePort). */
const handedOut = new Set<number>();

/** Where the kernel's ephemeral range starts (`ip_local_port_range`): it picks ports for `listen(0)` and outgoing connections above. */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(low)) return low;
  } catch {
    /* not Linux */
  }
  return 32768;
}
/** Ports freePort picks from: below the ephemeral range, above the well-known services (Postgres, NATS). */
const PICK_FROM = 10_000;
const PICK_BELOW = ephemeralLow();

/** Listens on `port` on loopback and closes again: the port, or undefined when it is taken. */
function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => {
      const bound = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(bound));
    });
  });
}

/** True when something already listens on `port` on loopback (another stack's gateway, say). */
export async function portInUse(port: number): Promise<boolean> {
  return (await tryPort(port)) === undefined;
}

/**
 * A port nothing listens on, for a process started next. It is released before that process binds it, so two rules
 * keep that window safe: the port is never one the kernel hands out by itself (it comes from below the ephemeral
 * range, where `listen(0)` and outgoing connections never land), and this process never hands out the same port
 * twice (a released port was otherwise given again: 3 % of 20-port stacks had two processes on one port, and a
 * service's requests then reached another service).
 */
export async function freePort(): Promise<number> {
  const span = PICK_BELOW - PICK_FROM;
  for (let tries = 0; tries < 200; tries++) {
    const candidate = span > 1_000 ? PICK_FROM + Math.floor(Math.random() * span) : 0;
    if (handedOut.has(candidate)) continue;
    const port = await tryPort(candidate);
    if (port !== undefined && !handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error("no free port on 127.0.0.1");
}

/**
 * A TCP round-robin on loopback: each new connection goes to the next of
 * `ports` (skipping one that refuses), as a Kubernetes Service spreads
 * connections over its pods. Answers the port it listens on.
 */
export async function roundRobin(ports: number[], listenPort = 0): Promise<{ port: number; close(): Promise<void> }> {
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.once("close", () => sockets.delete(client));
    const attempt = (tries: number) => {
      const port = ports[next++ % ports.length];
      const upstream = net.connect({ host: "127.0.0.1", port });
      sockets.add(upstream);
      upstream.once("close", () => sockets.delete(upstream));
      upstream.once("error", () => {
        if (!upstream.readableEnded && tries < ports.length && client.readable && !client.destroyed && upstream.bytesWritten === 0) {
          attempt(tries + 1);
        } else {
          client.destroy();
        }
      });
      upstream.once("connect", () => {
        client.pipe(upstream);
        upstream.pipe(client);
        client.once("error", () => upstream.destroy());
        client.once("close", () => upstream.destroy());
        upstream.once("close", () => client.destroy());
      });
    };
    client.on("error", () => undefined);
    attempt(1);
  });
  // Its own port comes from freePort too, so that no process of the stack is told the port a balancer took.
  const listen = (p: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(p, "127.0.0.1", () => {
        server.removeListener("error", reject);
        resolve();
      });
    });
  if (listenPort !== 0) await listen(listenPort);
  else {
    for (let tries = 1; ; tries++) {
      try {
        await listen(await freePort());
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || tries >= 5) throw err;
      }
    }
  }
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** True when host:port accepts a TCP connection within `timeoutMs`. */
export function reachable(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * Node flags of every service process. A heap budget keeps each service well
 * under 200 MB resident: live data is ~30–40 MB, but on a large machine V8
 * lets garbage pile up to hundreds of MB before a full collection. The k8s
 * manifests pass the same flag.
 */
export const SERVICE_NODE_ARGS = ["--max-old-space-size=128"];

export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/messaging";

/**
 * The bus namespace of a stack started without BUS_NAMESPACE: none for the default database, else the database's
 * name (as BUS_NAMESPACE allows it: lowercase letters, digits and _). Two stacks given different databases then stay
 * apart even when their NATS_URLs name one server (`localhost` and `127.0.0.1`, say): on one namespace, each took the
 * other's provider batches and dropped them as for an unknown number.
 */
export function defaultNamespace(databaseUrl: string): string {
  let name: string;
  try {
    name = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  } catch {
    return "";
  }
  if (name === "" || name === new URL(DEFAULT_DATABASE_URL).pathname.slice(1)) return "";
  return name.toLowerCase().replace(/[^a-z0-9_]/g, "_").slice(0, 48);
}
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

/**
 * Starts every process with `CONFIG_CHECK_ONLY=1`: each prints one line per
 * bad variable of its own and exits, nothing listens or connects. True when
 * every configuration is good.
 */
export async function checkConfiguration(opts: StackOptions = {}): Promise<boolean> {
  let done!: (ok: boolean) => void;
  const result = new Promise<boolean>((resolve) => (done = resolve));
  await startStack({ ...opts, env: { ...opts.env, CONFIG_CHECK_ONLY: "1" }, onChecked: done });
  return result;
}

/** Null when Postgres and NATS answer (retrying for a few seconds), else one line saying how to get them. */
export async function checkDependencies(databaseUrl: string, natsUrl: string, waitMs = 5_000): Promise<string | null> {
  const pg = new URL(databaseUrl);
  const nats = new URL(natsUrl.split(",")[0].trim());
  const targets = [
    { what: "PostgreSQL", host: pg.hostname, port: Number(pg.port || 5432) },
    { what: "NATS", host: nats.hostname, port: Number(nats.port || 4222) },
  ];
  const deadline = Date.now() + waitMs;
  for (const t of targets) {
    while (!(await reachable(t.host, t.port))) {
      if (Date.now() > deadline) {
        return (
          `${t.what} does not answer at ${t.host}:${t.port}: start it with \`bash infra/dev-services.sh\` ` +
          `(or \`docker compose -f infra/docker-compose.yml up -d postgres nats\`, or install the OS package: postgresql / nats-server with -js)`
        );
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return null;
}

/** Postgres's answers to a login that no wait can change: the role does not exist or may not connect, or a wrong password. */
const LOGIN_REFUSED = new Set(["28000", "28P01"]);

/**
 * Null when PostgreSQL accepts `databaseUrl`'s login (role and password), else one line saying what it refused: a
 * configuration error, which the services would otherwise wait out for ever. The database itself may not exist yet
 * (the services create it): then the login is tried on the maintenance database `postgres`. Anything else (a
 * timeout, a server starting up) is left to the services, which wait for their database.
 */
export async function checkDatabaseLogin(databaseUrl: string): Promise<string | null> {
  const attempt = async (url: string): Promise<string | undefined> => {
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
      return undefined;
    } catch (err) {
      return (err as { code?: string }).code ?? "unknown";
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  let code = await attempt(databaseUrl);
  if (code === "3D000") {
    const maintenance = new URL(databaseUrl);
    maintenance.pathname = "/postgres";
    code = await attempt(maintenance.toString());
  }
  if (code === undefined || !LOGIN_REFUSED.has(code)) return null;
  const url = new URL(databaseUrl);
  const role = decodeURIComponent(url.username) || "(the default role)";
  return code === "28P01"
    ? `DATABASE_URL is refused by PostgreSQL: wrong password for role ${role}`
    : `DATABASE_URL is refused by PostgreSQL: role ${role} does not exist or may not connect to ${url.hostname}:${url.port || 5432}`;
}

const COLORS = [36, 35, 33, 32, 34, 91, 96];
/** How long a process has to stop after SIGTERM before the runner kills it (a pod's grace period, shortened). */
const STOP_GRACE_MS = 10_000;

/**
 * One line of a process's output as the runner prints it: the process's name in front. With `rawJson` (`npm start` off
 * a terminal), a JSON log line goes out as it is (JSON logs on stdout, contract section 1: each names its
 * `service`). On a terminal, JSON lines are made readable.
 */
function formatLine(name: string, line: string, pretty: boolean, color: number, rawJson = false): string {
  const prefix = pretty ? `\x1b[${color}m[${name}]\x1b[0m` : `[${name}]`;
  if (rawJson && !pretty && line.startsWith("{") && line.endsWith("}")) return line;
  if (!pretty || !line.startsWith("{")) return `${prefix} ${line}`;
  try {
    const rec = JSON.parse(line) as Record<string, unknown>;
    const { level, time, msg, service: _s, pid: _p, hostname: _h, ...rest } = rec;
    const fields = Object.entries(rest)
      .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
      .join(" ");
    const t = typeof time === "string" ? time.slice(11, 23) : "";
    return `${prefix} ${t} ${String(level ?? "").toUpperCase().padEnd(5)} ${msg ?? ""}${fields ? "  " + fields : ""}`;
  } catch {
    return `${prefix} ${line}`;
  }
}

/** Folders under services/ that have a build to run. */
export function discoverServices(root = REPO_ROOT): string[] {
  const dir = path.join(root, "services");
  return readdirSync(dir)
    .filter((name) => name !== "gateway" && existsSync(path.join(dir, name, "dist", "index.js")))
    .sort();
}

const urlVar = (service: string) => `${service.toUpperCase().replace(/-/g, "_")}_URL`;

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const log = opts.onLog ?? ((line: string) => process.stdout.write(line + "\n"));
  const pretty = opts.pretty ?? false;
  const port = opts.port ?? 8080;
  const adminToken = opts.adminToken ?? process.env.ADMIN_TOKEN ?? `adm_${randomBytes(24).toString("base64url")}`;
  const internalToken = opts.internalToken ?? process.env.INTERNAL_TOKEN ?? `int_${randomBytes(24).toString("base64url")}`;
  const base: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATABASE_URL: opts.databaseUrl ?? process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL,
    NATS_URL: opts.natsUrl ?? process.env.NATS_URL ?? DEFAULT_NATS_URL,
    INTERNAL_TOKEN: internalToken,
    ...(opts.namespace !== undefined ? { BUS_NAMESPACE: opts.namespace } : {}),
    ...opts.env,
  };
  base.BUS_NAMESPACE ??= defaultNamespace(base.DATABASE_URL);
  delete base.PORT;

  const procs: Proc[] = [];
  let simulatorUrl: string | undefined;
  if (!base.PROVIDER_BASE_URL) {
    const simPort = await freePort();
    simulatorUrl = `http://127.0.0.1:${simPort}`;
    base.PROVIDER_BASE_URL = simulatorUrl;
    procs.push({
      name: "provider-simulator",
      script: path.join(REPO_ROOT, "packages/provider-simulator/dist/cli.js"),
      env: { ...base, PORT: String(simPort), PROVIDER_WEBHOOK_URL: `http://127.0.0.1:${port}/provider/webhooks` },
      restarts: 0,
    });
  }
  const replicas = Math.max(1, opts.replicas ?? 1);
  const balancers: Array<{ close(): Promise<void> }> = [];
  const gatewayEnv: Record<string, string> = { ...base, ADMIN_TOKEN: adminToken };
  for (const name of discoverServices()) {
    const ports: number[] = [];
    for (let i = 1; i <= replicas; i++) {
      const servicePort = await freePort();
      ports.push(servicePort);
      procs.push({
        name: replicas > 1 ? `${name}-${i}` : name,
        script: path.join(REPO_ROOT, "services", name, "dist/index.js"),
        env: { ...base, PORT: String(servicePort) },
        restarts: 0,
      });
    }
    if (replicas > 1) {
      const balancer = await roundRobin(ports);
      balancers.push(balancer);
      gatewayEnv[urlVar(name)] = `http://127.0.0.1:${balancer.port}`;
    } else {
      gatewayEnv[urlVar(name)] = `http://127.0.0.1:${ports[0]}`;
    }
  }
  const gatewayPorts: number[] = [];
  for (let i = 1; i <= replicas; i++) {
    const gatewayPort = replicas > 1 ? await freePort() : port;
    gatewayPorts.push(gatewayPort);
    procs.push({
      name: replicas > 1 ? `gateway-${i}` : "gateway",
      script: path.join(REPO_ROOT, "services/gateway/dist/index.js"),
      env: { ...gatewayEnv, PORT: String(gatewayPort), ...(replicas > 1 ? { REPLICA_ID: `gateway-${i}` } : {}) },
      restarts: 0,
    });
  }
  if (replicas > 1) balancers.push(await roundRobin(gatewayPorts, port));

  let stopping = false;
  // The first process that exited on a bad variable; reported once every process has judged its own configuration
  // (each prints its lines), so that an operator sees every bad variable at once.
  let configFailed: string | undefined;
  let configReported = false;
  const reportConfig = () => {
    if (configReported || configFailed === undefined) return;
    configReported = true;
    opts.onConfigError?.(configFailed);
  };
  const judged = (p: Proc, bad: boolean) => {
    p.judged = true;
    if (bad && configFailed === undefined) {
      configFailed = p.name;
      setTimeout(reportConfig, CONFIG_VERDICT_WAIT_MS).unref();
    }
    if (!procs.every((q) => q.judged)) return;
    if (opts.onChecked) opts.onChecked(configFailed === undefined);
    else reportConfig();
  };
  const spawnProc = (p: Proc, color: number) => {
    // STACK_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", not allowed in NODE_OPTIONS) profiles the services.
    const extra = (process.env.STACK_NODE_ARGS ?? "").split(" ").filter(Boolean);
    const nodeArgs = p.name === "provider-simulator" ? [] : [...SERVICE_NODE_ARGS, ...extra];
    // Its own process group, so that a Ctrl-C reaches the supervisor alone and each process gets exactly one SIGTERM
    // from it; the IPC channel ends when the supervisor does, even killed outright, and the process then stops too.
    const child = spawn(process.execPath, [...nodeArgs, p.script], { cwd: REPO_ROOT, env: p.env, stdio: ["ignore", "pipe", "pipe", "ipc"], detached: true });
    p.child = child;
    for (const stream of [child.stdout!, child.stderr!]) {
      readline.createInterface({ input: stream }).on("line", (line) => log(formatLine(p.name, line, pretty, color, opts.rawJson)));
    }
    child.on("message", (message: { type?: string }) => {
      if (message?.type === CONFIG_OK_MESSAGE.type && !p.judged && !opts.onChecked) judged(p, false);
    });
    child.on("exit", (code, signal) => {
      if (opts.onChecked) return judged(p, code !== 0);
      if (stopping) return;
      if (code === EXIT_CONFIG) {
        log(formatLine("stack", `${p.name} has a configuration error (above); not restarting it`, pretty, 37));
        judged(p, true);
        return;
      }
      if (!p.judged) judged(p, false);
      p.restarts++;
      log(formatLine("stack", `${p.name} exited (${signal ?? `code ${code}`}); restarting in 1 s (restart #${p.restarts})`, pretty, 37));
      setTimeout(() => {
        if (!stopping) spawnProc(p, color);
      }, 1_000);
    });
  };
  procs.forEach((p, i) => spawnProc(p, COLORS[i % COLORS.length]));

  const url = `http://127.0.0.1:${port}`;
  const stack: Stack = {
    url,
    adminToken,
    internalToken,
    simulatorUrl,
    env: base,
    gatewayUrls: gatewayPorts.map((p) => `http://127.0.0.1:${p}`),
    names: () => procs.map((p) => p.name),
    serviceUrl: (name) => {
      const p = procs.find((q) => q.name === name);
      return p?.env.PORT ? `http://127.0.0.1:${p.env.PORT}` : undefined;
    },
    pid: (name) => procs.find((p) => p.name === name)?.child?.pid,
    restarts: (name) => procs.find((p) => p.name === name)?.restarts ?? 0,
    kill: (name, signal = "SIGKILL") => {
      procs.find((p) => p.name === name)?.child?.kill(signal);
    },
    waitReady: async (timeoutMs = opts.readyTimeoutMs ?? 90_000) => {
      const deadline = Date.now() + timeoutMs;
      let last = "";
      while (Date.now() < deadline) {
        try {
          const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) });
          last = await res.text();
          if (res.status === 200) return;
        } catch (err) {
          last = (err as Error).message;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`stack not ready within ${timeoutMs} ms: ${last}`);
    },
    stop: async () => {
      stopping = true;
      await Promise.all(balancers.map((b) => b.close()));
      const end = (p: Proc) =>
        new Promise<void>((resolve) => {
          const child = p.child;
          if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => {
            log(formatLine("stack", `${p.name} did not stop within ${STOP_GRACE_MS / 1000} s of SIGTERM; killing it`, pretty, 37));
            child.kill("SIGKILL");
          }, STOP_GRACE_MS);
          child.once("exit", () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill("SIGTERM");
        });
      // As a rolling stop would: the gateways first (no new request comes in; those in flight are answered by services
      // still up), then the services (a provider call in flight gets its answer), the bundled provider simulator last.
      const tiers = [
        procs.filter((p) => p.name === "gateway" || p.name.startsWith("gateway-")),
        procs.filter((p) => p.name !== "provider-simulator" && p.name !== "gateway" && !p.name.startsWith("gateway-")),
        procs.filter((p) => p.name === "provider-simulator"),
      ];
      for (const tier of tiers) await Promise.all(tier.map(end));
    },
  };
  return stack;
}
