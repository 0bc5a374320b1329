import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { freePort, reachable } from "@platform/stack";

/**
 * A PostgreSQL and a NATS server of the fault suite's own, on free ports and
 * in temporary folders, so the suite can kill and restart them without
 * touching the machine's shared servers (other test runs use those).
 *
 * Every command runs asynchronously: the suite's webhook receivers and the
 * provider simulator live in this process, and a synchronous `pg_ctl -w`
 * stopped them answering for as long as Postgres took to restart. On a busy
 * machine that passed the dispatcher's attempt timeout ten times in a row, so
 * the receivers' webhooks were deactivated (as the contract says) and every
 * later event was never delivered.
 */
const exec = promisify(execFile);
const waitFor = async (what: string, check: () => Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not come up within ${timeoutMs} ms`);
};

function postgresBin(): string {
  const root = "/usr/lib/postgresql";
  const version = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a))[0] : undefined;
  if (!version) throw new Error("the fault suite needs PostgreSQL's server binaries (Debian package postgresql) under /usr/lib/postgresql");
  return path.join(root, version, "bin");
}

export class PrivatePostgres {
  private constructor(
    private readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/faults`;
  }

  /** initdb as the `postgres` user when run as root (Postgres refuses to run as root). */
  private static async run(cmd: string, args: string[]): Promise<void> {
    const asRoot = process.getuid?.() === 0;
    await exec(asRoot ? "runuser" : cmd, asRoot ? ["-u", "postgres", "--", cmd, ...args] : args);
  }

  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(path.join(tmpdir(), "faults-pg-"));
    if (process.getuid?.() === 0) await exec("chown", ["-R", "postgres:postgres", dir]);
    const pg = new PrivatePostgres(dir, await freePort());
    await PrivatePostgres.run(path.join(postgresBin(), "initdb"), ["-D", path.join(dir, "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
    await pg.up();
    await exec("psql", ["-h", "127.0.0.1", "-p", String(pg.port), "-U", "postgres", "-c", "CREATE DATABASE faults"]);
    return pg;
  }

  private async up(): Promise<void> {
    await PrivatePostgres.run(path.join(postgresBin(), "pg_ctl"), [
      "-D", path.join(this.dir, "data"),
      "-l", path.join(this.dir, "log"),
      "-o", `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c max_connections=300 -c fsync=off`,
      "-w", "start",
    ]);
    await waitFor("private Postgres", () => reachable("127.0.0.1", this.port));
  }

  /** Stops it as a crash would (`immediate`: no checkpoint, clients cut), then starts it again. */
  async restart(): Promise<void> {
    await PrivatePostgres.run(path.join(postgresBin(), "pg_ctl"), ["-D", path.join(this.dir, "data"), "-m", "immediate", "-w", "stop"]);
    await this.up();
  }

  async stop(): Promise<void> {
    try {
      await PrivatePostgres.run(path.join(postgresBin(), "pg_ctl"), ["-D", path.join(this.dir, "data"), "-m", "immediate", "-w", "stop"]);
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

export class PrivateNats {
  private child?: ChildProcess;

  private constructor(
    private readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<PrivateNats> {
    const nats = new PrivateNats(mkdtempSync(path.join(tmpdir(), "faults-nats-")), await freePort());
    await nats.up();
    return nats;
  }

  private async up(): Promise<void> {
    this.child = spawn("/usr/sbin/nats-server", ["-a", "127.0.0.1", "-p", String(this.port), "-js", "-sd", this.dir], { stdio: "ignore" });
    await waitFor("private NATS", () => reachable("127.0.0.1", this.port));
  }

  private async down(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill(signal);
    });
  }

  /** Killed outright (kill -9), then started again on the same store. */
  async restart(): Promise<void> {
    await this.down("SIGKILL");
    await this.up();
  }

  async stop(): Promise<void> {
    await this.down("SIGTERM");
    rmSync(this.dir, { recursive: true, force: true });
  }
}
