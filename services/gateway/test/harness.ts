import http from "node:http";
import type { AddressInfo } from "node:net";
import request from "supertest";
import { Bus } from "@platform/bus";
import { openDatabase, type DataSource } from "@platform/db";
import { createLogger } from "@platform/logging";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { createGateway, envSchema, type Gateway, type GatewayEnv } from "../src/app";
import { definitionEntities, definitionMigrations, SCHEMA } from "../src/db/definition";

export const ADMIN_TOKEN = "test-admin-token-0123456789";

export interface Replica {
  gateway: Gateway;
  bus: Bus;
  url: string;
  server: http.Server;
}

/** One test run's gateway stack: its own database and namespace, real Postgres and NATS. */
export class GatewayHarness {
  env!: TestEnvironment;
  db!: DataSource;
  replicas: Replica[] = [];
  readonly log = createLogger("gateway-test", "silent");

  async start(extra: Partial<Record<keyof GatewayEnv, string>> = {}): Promise<this> {
    this.env = await createTestEnvironment("gw");
    this.db = await openDatabase({ url: this.env.databaseUrl, schema: SCHEMA, entities: definitionEntities, migrations: definitionMigrations });
    await this.addReplica(extra);
    return this;
  }

  gatewayEnv(extra: Partial<Record<keyof GatewayEnv, string>> = {}): GatewayEnv {
    return envSchema.parse({
      DATABASE_URL: this.env.databaseUrl,
      NATS_URL: this.env.natsUrl,
      BUS_NAMESPACE: this.env.namespace,
      INTERNAL_TOKEN: this.env.internalToken,
      ADMIN_TOKEN,
      LOG_LEVEL: "silent",
      ...extra,
    });
  }

  /** Another gateway replica on the same database and bus. */
  async addReplica(extra: Partial<Record<keyof GatewayEnv, string>> = {}): Promise<Replica> {
    const env = this.gatewayEnv(extra);
    const bus = await Bus.connect({ url: env.NATS_URL, namespace: env.BUS_NAMESPACE, name: "gw-test", log: this.log });
    await bus.ensureStreams();
    const gateway = createGateway({ env, log: this.log, db: this.db, bus });
    const server = await new Promise<http.Server>((resolve) => {
      const s = http.createServer(gateway.listener).listen(0, "127.0.0.1", () => resolve(s));
    });
    const replica = { gateway, bus, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
    this.replicas.push(replica);
    return replica;
  }

  get url(): string {
    return this.replicas[0].url;
  }

  admin(url = this.url) {
    const agent = request(url);
    return {
      post: (path: string) => agent.post(path).set("Authorization", `Bearer ${ADMIN_TOKEN}`),
      get: (path: string) => agent.get(path).set("Authorization", `Bearer ${ADMIN_TOKEN}`),
      patch: (path: string) => agent.patch(path).set("Authorization", `Bearer ${ADMIN_TOKEN}`),
      delete: (path: string) => agent.delete(path).set("Authorization", `Bearer ${ADMIN_TOKEN}`),
    };
  }

  /** A new organization and an API key of it. */
  async organization(body: Record<string, unknown> = {}): Promise<{ id: string; key: string; keyId: string; org: any }> {
    const org = await this.admin().post("/admin/v1/organizations").send({ name: "Acme", ...body }).expect(201);
    const key = await this.admin().post(`/admin/v1/organizations/${org.body.id}/api-keys`).send({ name: "ci" }).expect(201);
    return { id: org.body.id, key: key.body.key, keyId: key.body.id, org: org.body };
  }

  async stop(): Promise<void> {
    for (const r of this.replicas) {
      await r.gateway.stop();
      await new Promise((resolve) => r.server.close(resolve));
      r.server.closeAllConnections?.();
      await r.bus.close();
    }
    await this.db.destroy();
    await this.env.cleanup();
  }
}

/** A plain HTTP server standing in for the network beyond the gateway: it answers with what it received. */
export async function echoServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
