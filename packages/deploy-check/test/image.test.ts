import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { Client } from "pg";
import semver from "semver";
import { createTestEnvironment, eventually, randomSuffix, type TestEnvironment } from "@platform/testing";
import { REPO_ROOT } from "../src/render";
import { freePort } from "@platform/stack";

/**
 * The image's file list: infra/image-files.sh (what the Dockerfile's build stage runs) applied to a copy of this
 * built workspace, then every service started from it as the image starts it (`node dist/index.js` in
 * /app/services/<name>, HOST=0.0.0.0), two instances of each at the same moment against one fresh database, each
 * service with its own database role from k8s/base/postgres/roles.sql.
 */
const SCHEMAS: Record<string, string> = { gateway: "gateway", messaging: "messaging", contacts: "contacts", "webhook-dispatcher": "webhooks", "template-jobs": "template_jobs", analytics: "analytics" };
const DEV_ONLY = ["mocha", "chai", "typescript", "ts-node", "turbo", "supertest", "kubernetes-models", "@redocly/cli", "dockerfile-utils"];

function duSize(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    total += entry.isDirectory() ? duSize(p) : statSync(p).size;
  }
  return total;
}

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2_000) })).status;
  } catch {
    return 0;
  }
}

describe("the image's file list (infra/image-files.sh) builds and starts", function () {
  let tmp: string;
  let app: string;
  let env: TestEnvironment;
  let prefix: string;
  const procs: Array<{ name: string; child: ChildProcess; port: number; output: string[] }> = [];
  let services: string[];

  before(async function () {
    tmp = mkdtempSync(path.join(os.tmpdir(), "image-files-"));
    const src = path.join(tmp, "src");
    app = path.join(tmp, "app");
    execFileSync("mkdir", [src]);
    // The build context after `npm install` and the build, as in the Dockerfile's build stage (copied: the script prunes).
    const entries = ["package.json", "package-lock.json", "node_modules", "packages", "services", "test-e2e", "bench"];
    execFileSync("cp", ["-a", ...entries.map((e) => path.join(REPO_ROOT, e)), src]);
    execFileSync("bash", [path.join(REPO_ROOT, "infra/image-files.sh"), src, app], { stdio: ["ignore", "ignore", "inherit"] });
    services = readdirSync(path.join(app, "services")).filter((s) => existsSync(path.join(app, "services", s, "dist/index.js")));
    env = await createTestEnvironment("image");
    prefix = `t${randomSuffix()}_`;
  });

  after(async function () {
    await Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
            const timer = setTimeout(() => p.child.kill("SIGKILL"), 15_000);
            p.child.once("exit", () => {
              clearTimeout(timer);
              resolve();
            });
            p.child.kill("SIGTERM");
          }),
      ),
    );
    await env?.cleanup();
    const admin = new Client({ connectionString: new URL("/postgres", env?.databaseUrl ?? "postgres://postgres@127.0.0.1:5432/postgres").toString() });
    await admin.connect();
    try {
      for (const schema of Object.values(SCHEMAS)) await admin.query(`DROP ROLE IF EXISTS "${prefix}${schema}"`);
    } finally {
      await admin.end();
    }
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("holds every service's dist and production dependencies only, without sources, tests or dev tools", () => {
    for (const name of ["gateway", "messaging", "contacts", "webhook-dispatcher"]) expect(services, name).to.include(name);
    expect(existsSync(path.join(app, "packages/provider-simulator/dist/cli.js"))).to.equal(true);
    for (const dev of DEV_ONLY) expect(existsSync(path.join(app, "node_modules", dev)), dev).to.equal(false);
    for (const top of ["packages", "services"]) {
      for (const pkg of readdirSync(path.join(app, top))) {
        const files = readdirSync(path.join(app, top, pkg)).filter((f) => f !== "node_modules");
        expect(files.sort(), `${top}/${pkg}`).to.deep.equal(["dist", "package.json"]);
      }
    }
    expect(existsSync(path.join(app, "packages/testing"))).to.equal(false);
    // The console: the gateway's copy of its build only; its bundled libraries and build tools stay out.
    expect(existsSync(path.join(app, "services/gateway/dist/public/console/index.html"))).to.equal(true);
    expect(existsSync(path.join(app, "packages/console"))).to.equal(false);
    for (const bundled of ["react", "react-dom", "chart.js", "vite", "@platform/console"]) expect(existsSync(path.join(app, "node_modules", bundled)), bundled).to.equal(false);
    const mb = duSize(app) / 1024 / 1024;
    console.log(`      image file list: ${mb.toFixed(1)} MB under /app (${services.length} services)`);
  });

  it("needs nothing of its dependencies beyond engines.node, which the image's and CI's Node satisfy", () => {
    const root = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8"));
    const min = semver.minVersion(root.engines.node)!.version;
    expect(semver.satisfies(process.version, root.engines.node)).to.equal(true);
    const dockerNode = /FROM node:(\d+\.\d+)/.exec(readFileSync(path.join(REPO_ROOT, "Dockerfile"), "utf8"))![1];
    expect(semver.satisfies(`${dockerNode}.0`, root.engines.node), `Dockerfile node:${dockerNode}`).to.equal(true);
    const lock = JSON.parse(readFileSync(path.join(REPO_ROOT, "package-lock.json"), "utf8"));
    const conflicts = Object.entries(lock.packages as Record<string, { engines?: { node?: string } | string[] }>)
      .filter(([, info]) => info.engines && !Array.isArray(info.engines) && info.engines.node)
      .filter(([, info]) => {
        const range = (info.engines as { node: string }).node;
        return !semver.satisfies(min, range) || !semver.satisfies(`${dockerNode}.0`, range) || !semver.satisfies(process.version, range);
      })
      .map(([name, info]) => `${name} ${(info.engines as { node: string }).node}`);
    expect(conflicts).to.deep.equal([]);
  });

  it("starts two instances of every service at once from it, each as its own database role limited to its schema", async function () {
    // What CloudNativePG does: roles.sql once as superuser in the application database, then managed roles get LOGIN.
    const db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    try {
      await db.query(`SET deploy.role_prefix = '${prefix}'`);
      await db.query(readFileSync(path.join(REPO_ROOT, "k8s/base/postgres/roles.sql"), "utf8"));
      for (const schema of Object.values(SCHEMAS)) await db.query(`ALTER ROLE "${prefix}${schema}" LOGIN`);
    } finally {
      await db.end();
    }
    const roleUrl = (schema: string) => {
      const u = new URL(env.databaseUrl);
      u.username = `${prefix}${schema}`;
      return u.toString();
    };

    for (const name of services) {
      for (let i = 0; i < 2; i++) {
        const port = await freePort();
        const output: string[] = [];
        const child = spawn(process.execPath, ["--max-old-space-size=128", "dist/index.js"], {
          cwd: path.join(app, "services", name),
          env: {
            PATH: process.env.PATH,
            NODE_ENV: "production",
            HOST: "0.0.0.0",
            PORT: String(port),
            DATABASE_URL: roleUrl(SCHEMAS[name] ?? name.replace(/-/g, "_")),
            NATS_URL: env.natsUrl,
            BUS_NAMESPACE: env.namespace,
            INTERNAL_TOKEN: env.internalToken,
            ADMIN_TOKEN: "image-test-admin-token",
            PROVIDER_BASE_URL: "http://127.0.0.1:9",
            LOG_LEVEL: "warn",
          },
          stdio: ["ignore", "pipe", "pipe"],
        });
        child.stdout!.on("data", (d) => output.push(String(d)));
        child.stderr!.on("data", (d) => output.push(String(d)));
        procs.push({ name, child, port, output });
      }
    }
    const notReady = async () => {
      const waiting: string[] = [];
      for (const p of procs) {
        if (p.child.exitCode !== null) throw new Error(`${p.name} exited ${p.child.exitCode}: ${p.output.join("").slice(-2000)}`);
        if ((await status(`http://127.0.0.1:${p.port}/healthz`)) !== 200 || (await status(`http://127.0.0.1:${p.port}/readyz`)) !== 200) waiting.push(p.name);
      }
      return waiting;
    };
    await eventually(async () => (await notReady()).length === 0, 180_000);

    const check = new Client({ connectionString: env.databaseUrl });
    await check.connect();
    try {
      for (const name of services) {
        const schema = SCHEMAS[name] ?? name.replace(/-/g, "_");
        const owner = await check.query("SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = $1", [schema]);
        expect(owner.rows[0]?.owner, name).to.equal(`${prefix}${schema}`);
        const runs = await check.query(`SELECT name, count(*)::int AS n FROM "${schema}".migrations GROUP BY name`);
        expect(runs.rows.length, `${name} migrations`).to.be.greaterThan(0);
        expect(runs.rows.filter((r) => r.n !== 1), `${name}: a migration ran twice`).to.deep.equal([]);
      }
    } finally {
      await check.end();
    }

    // A role reads and writes its own schema only, and cannot create another.
    const asGateway = new Client({ connectionString: roleUrl("gateway") });
    await asGateway.connect();
    try {
      const denied = await asGateway.query('SELECT 1 FROM "messaging".migrations').then(
        () => null,
        (e: { code?: string }) => e.code,
      );
      expect(denied).to.equal("42501");
      const noCreate = await asGateway.query("CREATE SCHEMA intruder").then(
        () => null,
        (e: { code?: string }) => e.code,
      );
      expect(noCreate).to.equal("42501");
    } finally {
      await asGateway.end();
    }
  });

  it("stops every instance cleanly on SIGTERM", async function () {
    const exits = await Promise.all(
      procs.map(
        (p) =>
          new Promise<number | null>((resolve) => {
            if (p.child.exitCode !== null) return resolve(p.child.exitCode);
            p.child.once("exit", (code) => resolve(code));
            p.child.kill("SIGTERM");
          }),
      ),
    );
    expect(exits.every((c) => c === 0), JSON.stringify(exits)).to.equal(true);
  });
});
