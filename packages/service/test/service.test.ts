import { expect } from "chai";
import express from "express";
import request from "supertest";
import { ConfigError } from "@platform/config";
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

  it("boots on real Postgres and NATS with probes, metrics and internal auth", async () => {
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
    } finally {
      await svc.stop();
    }
  });
});
