import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { Client } from "pg";
import { startService } from "@platform/service";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { definition } from "../src/service";
import { adminClient, eventually, newId, publishEvent, Receiver, serviceEnv, type Svc } from "./helpers";
import { Bus } from "@platform/bus";
import { createLogger } from "@platform/logging";

/** Boots the dispatcher as its own OS process (as `npm start` does), so it can be killed outright. */
async function spawnDispatcher(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
  const root = path.resolve(__dirname, "..");
  const child = spawn(process.execPath, ["-r", "ts-node/register", "-r", "reflect-metadata", "src/index.ts"], {
    cwd: root,
    env: { ...process.env, ...env, LOG_LEVEL: "info", TS_NODE_TRANSPILE_ONLY: "true" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = "";
    const timer = setTimeout(() => reject(new Error("dispatcher did not start")), 30_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      const m = /"port":(\d+)[^\n]*"msg":"service listening"/.exec(buffer);
      if (m) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${m[1]}`);
      }
    });
    child.once("exit", (code) => reject(new Error(`dispatcher exited with ${code}`)));
  });
  return { child, url };
}

describe("fault: the dispatcher killed while retries are pending", function () {
  this.timeout(60_000);
  let env: TestEnvironment;
  let receiver: Receiver;
  let child: ChildProcess | undefined;
  let restarted: Svc | undefined;
  let bus: Bus;

  before(async () => {
    env = await createTestEnvironment("whd_fault");
    bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "fault-test", log: createLogger("test", "silent") });
  });
  after(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    await restarted?.stop();
    await bus.close();
    await receiver?.close();
    await env.cleanup();
  });

  it("delivers every pending retry after a restart (SIGKILL, no graceful shutdown)", async () => {
    let healthy = false;
    receiver = await Receiver.start(() => (healthy ? { status: 200 } : { status: 500 }));
    const vars = serviceEnv(env, { WEBHOOK_RETRY_DELAYS_MS: "1500,1500,1500" });
    const spawned = await spawnDispatcher(vars);
    child = spawned.child;
    const org = newId("organization");
    const hook = (await adminClient(spawned.url, env.internalToken)(org).post("", { url: receiver.url + "/r", events: ["message.sent"] }).expect(201)).body;

    const events: string[] = [];
    for (let i = 0; i < 5; i++) events.push(await publishEvent(bus, "message.sent", org));
    const pg = new Client({ connectionString: env.databaseUrl });
    await pg.connect();
    try {
      // Every first attempt failed and was recorded, so each event has a retry scheduled.
      await eventually(async () => {
        const r = await pg.query(`SELECT count(*)::int AS n FROM webhooks.delivery_jobs WHERE attempt = 2`);
        return r.rows[0].n === 5;
      }, 15_000);
      child.kill("SIGKILL");
      await new Promise((r) => child!.once("exit", r));
      expect(receiver.requests).to.have.length(5);
      const pending = await pg.query(`SELECT event_id FROM webhooks.delivery_jobs WHERE webhook_id = $1`, [hook.id]);
      expect(pending.rows.map((r) => r.event_id).sort()).to.deep.equal([...events].sort());

      healthy = true;
      restarted = await startService(definition, vars, { exitOnConfigError: false });
      await eventually(() => events.every((id) => receiver.byEvent(id).some((q) => q.headers["x-service-delivery"] && q !== receiver.byEvent(id)[0])), 15_000);
      for (const id of events) {
        const reqs = receiver.byEvent(id);
        expect(reqs).to.have.length(2);
        expect(reqs[1].raw.equals(reqs[0].raw)).to.equal(true);
      }
      await eventually(async () => (await pg.query(`SELECT count(*)::int AS n FROM webhooks.delivery_jobs`)).rows[0].n === 0);
      const log = (await adminClient(restarted.url, env.internalToken)(org).get(`/${hook.id}/deliveries?limit=100`).expect(200)).body.items;
      expect(log.filter((l: { attempt: number; responseStatus: number }) => l.attempt === 2 && l.responseStatus === 200)).to.have.length(5);
    } finally {
      await pg.end();
    }
  });
});
