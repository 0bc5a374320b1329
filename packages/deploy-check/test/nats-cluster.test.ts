import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { Bus } from "@platform/bus";
import { STREAMS } from "@platform/contracts";
import { createLogger } from "@platform/logging";
import { eventually } from "@platform/testing";
import { render } from "../src/render";
import { freePort } from "@platform/stack";


/**
 * The prod overlay's NATS: its rendered nats.conf (ports, paths and peer addresses moved to this machine) run as
 * three local nats-server processes, and the platform's Bus told BUS_STREAM_REPLICAS=3 as the prod ConfigMap says:
 * every stream is created with 3 replicas, placed on the 3 servers, and survives one server stopping.
 */
describe("prod NATS: a 3-node JetStream cluster from the rendered nats.conf, streams at BUS_STREAM_REPLICAS", function () {
  const servers: ChildProcess[] = [];
  let dir: string;
  let clientPorts: number[];
  let replicas: number;
  let bus: Bus | undefined;
  const log = createLogger("nats-cluster-test", "silent");

  before(async function () {
    const objects = render("prod");
    const conf: string = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("nats-config"))!.data["nats.conf"];
    replicas = Number(objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "platform-config")!.data.BUS_STREAM_REPLICAS);
    const bin = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) => existsSync(p)) ?? "nats-server";
    dir = mkdtempSync(path.join(os.tmpdir(), "nats-cluster-"));
    clientPorts = [await freePort(), await freePort(), await freePort()];
    const clusterPorts = [await freePort(), await freePort(), await freePort()];
    const monitorPorts = [await freePort(), await freePort(), await freePort()];
    for (let i = 0; i < 3; i++) {
      let local = conf
        .replace(/^port: 4222$/m, `port: ${clientPorts[i]}`)
        .replace(/^http_port: 8222$/m, `http_port: ${monitorPorts[i]}`)
        .replace(/port: 6222/, `port: ${clusterPorts[i]}`)
        .replace("/var/run/nats/nats.pid", path.join(dir, `nats-${i}.pid`))
        .replace("/data/jetstream", path.join(dir, `data-${i}`));
      for (let j = 0; j < 3; j++) local = local.replace(`nats://nats-${j}.nats-headless:6222`, `nats://127.0.0.1:${clusterPorts[j]}`);
      expect(local).to.not.match(/nats-headless|\/data\/|\/var\/run/);
      const file = path.join(dir, `nats-${i}.conf`);
      writeFileSync(file, local);
      servers.push(spawn(bin, ["-c", file, "-a", "127.0.0.1"], { env: { ...process.env, POD_NAME: `nats-${i}` }, stdio: "ignore" }));
    }
  });

  after(async function () {
    await bus?.close().catch(() => undefined);
    for (const s of servers) if (s.exitCode === null) s.kill("SIGKILL");
    await Promise.all(servers.map((s) => (s.exitCode !== null || s.signalCode !== null ? undefined : new Promise((r) => s.once("exit", r)))));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("creates every stream with 3 replicas across the servers, and keeps them through a server stopping", async function () {
    expect(replicas).to.equal(3);
    const url = clientPorts.map((p) => `nats://127.0.0.1:${p}`).join(",");
    // The cluster elects its JetStream meta leader first: the services wait the same way (waitFor at start).
    await eventually(
      async () => {
        try {
          const candidate = await Bus.connect({ url, name: "nats-cluster-test", log, streamReplicas: replicas });
          try {
            await candidate.ensureStreams();
            bus = candidate;
            return true;
          } catch {
            await candidate.close();
            return false;
          }
        } catch {
          return false;
        }
      },
      60_000,
      500,
    );
    for (const def of Object.values(STREAMS)) {
      const info = await bus!.jsm.streams.info(bus!.streamName(def));
      expect(info.config.num_replicas, def.name).to.equal(3);
      await eventually(async () => {
        const i = await bus!.jsm.streams.info(bus!.streamName(def));
        return i.cluster?.leader && (i.cluster.replicas ?? []).length === 2 && i.cluster.replicas!.every((r) => r.current);
      }, 30_000, 200);
    }
    await bus!.publish("work.r3.v1", { n: 1 }, { msgId: "r3-before" });
    servers[2].kill("SIGTERM");
    await new Promise((r) => servers[2].once("exit", r));
    await eventually(async () => {
      try {
        await bus!.publish("work.r3.v1", { n: 2 }, { msgId: "r3-after" });
        return true;
      } catch {
        return false;
      }
    }, 30_000, 200);
    const work = await bus!.jsm.streams.info(bus!.streamName(STREAMS.work));
    expect(work.state.messages).to.equal(2);
  });
});
