import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import { expect } from "chai";
import { createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { checkDatabaseLogin, checkDependencies, defaultNamespace, discoverServices, freePort, reachable, REPO_ROOT, roundRobin } from "../src";

const ephemeralLow = () => Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);

describe("stack runner", () => {
  it("says in one line how to get PostgreSQL when it does not answer", async () => {
    const port = await freePort();
    const message = await checkDependencies(`postgres://postgres@127.0.0.1:${port}/x`, "nats://127.0.0.1:4222", 300);
    expect(message).to.be.a("string");
    expect(message).to.not.include("\n");
    expect(message).to.include("PostgreSQL does not answer");
    expect(message).to.include("infra/dev-services.sh");
  });

  it("says in one line how to get NATS when it does not answer", async () => {
    const port = await freePort();
    const message = await checkDependencies(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/x", `nats://127.0.0.1:${port}`, 300);
    expect(message).to.include("NATS does not answer");
  });

  it("says in one line that PostgreSQL refuses DATABASE_URL's role, and accepts a good one whose database does not exist yet", async () => {
    const refused = await checkDatabaseLogin("postgres://no_such_role_x7@127.0.0.1:5432/messaging");
    expect(refused).to.be.a("string").and.include("DATABASE_URL is refused by PostgreSQL").and.include("no_such_role_x7");
    expect(refused).to.not.include("\n");
    expect(await checkDatabaseLogin(`postgres://postgres@127.0.0.1:5432/not_created_yet_${process.pid}`)).to.equal(null);
    expect(await checkDatabaseLogin("postgres://postgres@127.0.0.1:5432/postgres")).to.equal(null);
  });

  it("finds the machine's PostgreSQL and NATS", async () => {
    expect(await reachable("127.0.0.1", 5432)).to.equal(true);
    expect(await checkDependencies("postgres://postgres@127.0.0.1:5432/x", "nats://127.0.0.1:4222")).to.equal(null);
  });

  it("never hands out one port twice, nor one the kernel picks for listen(0) or outgoing connections", async () => {
    // 2,000 ports: with the kernel's own choice (listen(0), released again) a port came back within a few dozen calls.
    const ports: number[] = [];
    for (let i = 0; i < 2_000; i++) ports.push(await freePort());
    expect(new Set(ports).size).to.equal(ports.length);
    expect(ports.filter((p) => p >= ephemeralLow() || p < 10_000)).to.deep.equal([]);
  });

  it("balances onto its own handed-out port, never one a process of the stack was told", async () => {
    const told = await freePort();
    const balancer = await roundRobin([told]);
    try {
      expect(balancer.port).to.not.equal(told);
      // Not the kernel's listen(0) choice, which freePort's later answers could not avoid.
      expect(balancer.port).to.be.below(ephemeralLow());
    } finally {
      await balancer.close();
    }
  });

  it("keeps stacks on different databases apart on one NATS: the bus namespace defaults to the database's name", () => {
    expect(defaultNamespace("postgres://postgres@127.0.0.1:5432/messaging")).to.equal("");
    expect(defaultNamespace("postgres://postgres@127.0.0.1:5432/Suite-Run.2")).to.equal("suite_run_2");
    expect(defaultNamespace("postgres://postgres@localhost/other")).to.equal("other");
    expect(defaultNamespace("postgres://postgres@localhost")).to.equal("");
  });

  it("discovers the built services", () => {
    expect(discoverServices()).to.include("contacts");
    expect(discoverServices()).to.not.include("gateway");
  });
});

describe("npm start (the stack in the foreground)", function () {
  this.timeout(120_000);
  let env: TestEnvironment;
  before(async () => {
    env = await createTestEnvironment("stackcli");
  });
  after(async () => env.cleanup());

  /** The processes this test's stack started: the ones whose environment carries its namespace. */
  const processesOfStack = () =>
    readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(`BUS_NAMESPACE=${env.namespace}`);
        } catch {
          return false;
        }
      });

  /** `npm start` without its build step (CI built everything already), output collected. */
  async function npmStart(extraEnv: Record<string, string> = {}) {
    const port = await freePort();
    const child = spawn("npm", ["start", "--ignore-scripts"], {
      cwd: REPO_ROOT,
      env: { ...process.env, PORT: String(port), DATABASE_URL: env.databaseUrl, BUS_NAMESPACE: env.namespace, LOG_LEVEL: "warn", ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout!.on("data", (b: Buffer) => (output += b.toString()));
    child.stderr!.on("data", (b: Buffer) => (output += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, exited, output: () => output };
  }

  it("drains and exits 0 on SIGTERM to npm itself, leaving no process behind; the services' logs are JSON lines on stdout", async () => {
    const run = await npmStart({ LOG_LEVEL: "info" });
    await eventually(() => run.output().includes("[stack] ready"), 90_000, 200);
    // Not on a terminal: each service's log line as it wrote it, one JSON object naming its service.
    const logged = run
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { service?: string; level?: unknown; msg?: string });
    expect(logged.some((r) => r.service === "gateway" && r.msg === "gateway listening")).to.equal(true);
    for (const service of ["messaging", "contacts"]) expect(logged.some((r) => r.service === service && r.msg === "service listening"), service).to.equal(true);
    // Every JSON line is shaped alike, the bundled simulator's too: a level and a time.
    expect(logged.some((r) => r.service === "provider-simulator" && r.msg === "provider simulator listening")).to.equal(true);
    expect(logged.filter((r) => typeof r.level !== "string" || typeof (r as { time?: unknown }).time !== "string")).to.deep.equal([]);
    expect(processesOfStack().length).to.be.greaterThan(4);
    run.child.kill("SIGTERM");
    expect(await run.exited).to.equal(0);
    await eventually(() => processesOfStack().length === 0, 10_000, 200);
  });

  it("keeps a development INTERNAL_TOKEN per database across runs (cursors it signed stay valid), one given in the environment wins", async () => {
    const tokenOfStack = () => {
      for (const pid of processesOfStack()) {
        try {
          const line = readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").find((v) => v.startsWith("INTERNAL_TOKEN="));
          if (line) return line.slice("INTERNAL_TOKEN=".length);
        } catch {
          // gone
        }
      }
      return undefined;
    };
    const runOnce = async (extraEnv: Record<string, string> = {}) => {
      const run = await npmStart(extraEnv);
      await eventually(() => run.output().includes("[stack] ready"), 90_000, 200);
      const token = tokenOfStack();
      run.child.kill("SIGTERM");
      expect(await run.exited).to.equal(0);
      await eventually(() => processesOfStack().length === 0, 10_000, 200);
      return token;
    };
    const first = await runOnce();
    expect(first).to.match(/^int_/);
    expect(await runOnce()).to.equal(first);
    expect(await runOnce({ INTERNAL_TOKEN: "int_given_by_the_environment_0123456789" })).to.equal("int_given_by_the_environment_0123456789");
  });

  it("a service whose port is taken when it starts exits 1 (for its supervisor to start it again), not up without a listener", async () => {
    const taken = net.createServer();
    const port = await new Promise<number>((resolve) => taken.listen(0, "127.0.0.1", () => resolve((taken.address() as net.AddressInfo).port)));
    try {
      const child = spawn(process.execPath, ["services/contacts/dist/index.js"], {
        cwd: REPO_ROOT,
        env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATABASE_URL: env.databaseUrl, BUS_NAMESPACE: env.namespace, INTERNAL_TOKEN: env.internalToken, LOG_LEVEL: "warn" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      child.stdout!.on("data", (b: Buffer) => (output += b.toString()));
      child.stderr!.on("data", (b: Buffer) => (output += b.toString()));
      const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
      expect(code, output).to.equal(1);
      expect(output).to.include("EADDRINUSE");
    } finally {
      taken.close();
    }
  });

  it("on SIGTERM, a provider call in flight gets its answer: the services drain before the bundled simulator stops", async () => {
    const run = await npmStart();
    await eventually(() => run.output().includes("[stack] ready"), 90_000, 200);
    const url = /\[stack\] ready: (\S+)/.exec(run.output())![1];
    const sim = /\[stack\] provider simulator: (\S+)/.exec(run.output())![1];
    const admin = /admin token \(generated for this run\): (\S+)/.exec(run.output())?.[1] ?? process.env.ADMIN_TOKEN!;
    const call = async (method: string, path: string, token: string, body?: unknown) => {
      const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    const org = (await call("POST", "/admin/v1/organizations", admin, { name: "drain" })).body.id as string;
    const key = (await call("POST", `/admin/v1/organizations/${org}/api-keys`, admin, { name: "k" })).body.key as string;
    const pnid = `drain${Date.now()}`;
    await call("POST", `/admin/v1/organizations/${org}/channels`, admin, { name: "c", phoneNumber: "+14155550100", providerPhoneNumberId: pnid });
    // An inbound message first: the service window lets a text go out.
    await fetch(`${sim}/_sim/inbound`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ phoneNumberId: pnid, from: "15550001234", text: "hi" }) });
    await eventually(async () => (await call("GET", "/api/v1/conversations", key)).body.items?.length === 1, 20_000, 100);
    await fetch(`${sim}/_sim/mode`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ kind: "slow", delayMs: 2_000, times: 1 }) });
    const send = call("POST", "/api/v1/messages", key, { to: "+15550001234", text: "in flight" });
    // The provider has the call (it answers in 2 s); then the stack is told to stop.
    await eventually(async () => {
      const { requests } = (await (await fetch(`${sim}/_sim/requests`)).json()) as { requests: Array<{ phoneNumberId: string }> };
      return requests.some((r) => r.phoneNumberId === pnid);
    }, 20_000, 50);
    run.child.kill("SIGTERM");
    const answered = await send;
    expect(answered.status, JSON.stringify(answered.body)).to.equal(200);
    expect(answered.body.providerMessageId, JSON.stringify(answered.body)).to.be.a("string");
    expect(await run.exited).to.equal(0);
    await eventually(() => processesOfStack().length === 0, 10_000, 200);
  });

  it("stops every service when npm is killed outright", async () => {
    const run = await npmStart();
    await eventually(() => run.output().includes("[stack] ready"), 90_000, 200);
    // SIGKILL gives npm no chance to pass anything on: the runner notices its parent is gone, the services their runner.
    run.child.kill("SIGKILL");
    await run.exited;
    await eventually(() => processesOfStack().length === 0, 15_000, 200);
  });

  it("exits non-zero with the service's one line when a variable is bad, without restarting it", async () => {
    const run = await npmStart({ RATE_LIMIT_PER_SECOND: "abc" });
    expect(await run.exited).to.equal(78);
    expect(run.output()).to.match(/config error \[gateway\]: RATE_LIMIT_PER_SECOND is invalid/);
    expect(run.output()).to.include("gateway has a configuration error");
    expect(run.output()).to.not.match(/restarting in/);
    await eventually(() => processesOfStack().length === 0, 10_000, 200);
  });

  it("says in one line that its port is taken, and starts nothing", async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, resolve));
    try {
      const run = await npmStart({ PORT: String((taken.address() as net.AddressInfo).port) });
      expect(await run.exited).to.equal(1);
      expect(run.output()).to.match(/port \d+ is in use/);
      expect(run.output()).to.not.include("[stack] ready");
      await eventually(() => processesOfStack().length === 0, 10_000, 200);
    } finally {
      taken.close();
    }
  });

  it("prints every bad variable of every process before it stops, not only the first process's", async () => {
    // Variables of three different processes: the first to exit must not stop the others before they print theirs.
    const run = await npmStart({ RATE_LIMIT_BURST: "x", PROVIDER_TIMEOUT_MS: "abc", WEBHOOK_TIMEOUT_MS: "abc" });
    expect(await run.exited).to.equal(78);
    expect(run.output()).to.match(/config error \[gateway\]: RATE_LIMIT_BURST is invalid/);
    expect(run.output()).to.match(/config error \[messaging\]: PROVIDER_TIMEOUT_MS is invalid/);
    expect(run.output()).to.match(/config error \[webhook-dispatcher\]: WEBHOOK_TIMEOUT_MS is invalid/);
    await eventually(() => processesOfStack().length === 0, 10_000, 200);
  });

  it("names a malformed DATABASE_URL, NATS_URL or PORT (hex is not a port), and still prints the processes' own bad variables", async () => {
    const run = await npmStart({ DATABASE_URL: "notaurl", NATS_URL: "notaurl", PORT: "0x1F90", RATE_LIMIT_BURST: "x" });
    expect(await run.exited).to.equal(78);
    const out = run.output();
    expect(out).to.match(/config error \[stack\]: PORT is invalid/);
    expect(out).to.match(/config error \[stack\]: DATABASE_URL is invalid: must be a URL/);
    expect(out).to.match(/config error \[stack\]: NATS_URL is invalid/);
    expect(out).to.match(/config error \[gateway\]: RATE_LIMIT_BURST is invalid/);
    // Once each: the services checked theirs with the runner's own replaced by good values.
    expect(out.match(/DATABASE_URL/g)).to.have.length(1);
    expect(out).to.not.include("stack failed");
    await eventually(() => processesOfStack().length === 0, 10_000, 200);
  });
});
