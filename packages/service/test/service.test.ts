import { expect } from "chai";
import express from "express";
import request from "supertest";
import { Bus } from "@platform/bus";
import { ConfigError } from "@platform/config";
import { SUBJECTS } from "@platform/contracts";
import { createLogger } from "@platform/logging";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { z } from "zod";
import { startService, type ServiceDefinition } from "../src";

const envShape = { GREETING: z.string().default("hello") };
const definition: ServiceDefinition<typeof envShape> = {
  name: "sample",
  schema: "sample",
  env: envShape,
  entities: [],
  migrations: [],
  outbox: false,
  routes: ({ env }) => express.Router().get("/api/v1/greeting", (_req, res) => void res.json({ greeting: env.GREETING })),
};

describe("startService", () => {
  let env: TestEnvironment;
  before(async () => {
    env = await createTestEnvironment("svc");
  });
  after(() => env.cleanup());

  it("refuses a bad configuration with one line per variable", async () => {
    try {
      await startService(definition, { DATABASE_URL: "nope", PORT: "x" }, { exitOnConfigError: false });
      expect.fail("should refuse");
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      const text = (err as ConfigError).problems.join("\n");
      expect(text).to.include("DATABASE_URL is invalid");
      expect(text).to.include("INTERNAL_TOKEN is missing");
      expect(text).to.include("PORT is invalid");
    }
  });

  it("boots on real Postgres and NATS with probes, metrics, internal auth and the envelope for headers it cannot read", async () => {
    const svc = await startService(
      definition,
      { DATABASE_URL: env.databaseUrl, NATS_URL: env.natsUrl, BUS_NAMESPACE: env.namespace, INTERNAL_TOKEN: env.internalToken, PORT: "0", LOG_LEVEL: "silent" },
      { exitOnConfigError: false },
    );
    try {
      const ready = await request(svc.url).get("/readyz").expect(200);
      expect(ready.body.checks).to.deep.equal({ postgres: "ok", nats: "ok" });
      await request(svc.url).get("/api/v1/greeting").expect(401);
      const res = await request(svc.url).get("/api/v1/greeting").set("x-internal-token", env.internalToken).expect(200);
      expect(res.body).to.deep.equal({ greeting: "hello" });
      // A call whose headers the gateway could still read but the service cannot (the gateway adds its own): the envelope.
      const huge = await request(svc.url).get("/api/v1/greeting").set("x-internal-token", env.internalToken).set("x-padding", "p".repeat(17_000));
      expect(huge.status).to.equal(413);
      expect(huge.body).to.deep.equal({ error: { code: "PAYLOAD_TOO_LARGE", message: "The request line and headers are over 16 KB" } });
    } finally {
      await svc.stop();
    }
  });

  it("tells every process when it serves HTTP requests, so their consumers yield the CPU while it is short (not for probes)", async () => {
    const raw = { DATABASE_URL: env.databaseUrl, NATS_URL: env.natsUrl, BUS_NAMESPACE: env.namespace, INTERNAL_TOKEN: env.internalToken, PORT: "0", LOG_LEVEL: "silent" };
    // A second process that serves nobody, on a CPU that is always short.
    const idle = await startService({ ...definition, name: "idle" }, { ...raw, CONSUMER_YIELD_CPU_PRESSURE: "0.2" }, { exitOnConfigError: false });
    const svc = await startService(definition, raw, { exitOnConfigError: false });
    const listener = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "serving-listener", log: createLogger("test", "silent") });
    const heard: string[] = [];
    listener.onBroadcast(SUBJECTS.loadServing, (m) => heard.push(m.service));
    await listener.nc.flush();
    try {
      expect(idle.loadGate.interactive).to.equal(false);
      await request(svc.url).get("/healthz").expect(200);
      await request(svc.url).get("/metrics");
      await listener.nc.flush();
      expect(heard).to.deep.equal([]);
      await request(svc.url).get("/api/v1/greeting").set("x-internal-token", env.internalToken).expect(200);
      await eventually(() => heard.includes("sample"), 5_000);
      // The process that serves nobody heard it too: while the CPU is short its consumers step back (the gate's own
      // tests cover that rule).
      await eventually(() => idle.loadGate.interactive, 5_000);
    } finally {
      await listener.close();
      await svc.stop();
      await idle.stop();
    }
  });
});

async function eventually(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
