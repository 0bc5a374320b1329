import http from "node:http";
import net, { type AddressInfo } from "node:net";
import request from "supertest";
import { Bus } from "@platform/bus";
import { openDatabase, type DataSource } from "@platform/db";
import { createHttpServer } from "@platform/http";
import { createLogger } from "@platform/logging";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { createGateway, envSchema, type Gateway, type GatewayEnv } from "../src/service";
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
  /** The rate limiters' clock for every replica of this harness (ms); undefined: the real one. */
  clock?: () => number;

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
    const gateway = createGateway({ env, log: this.log, db: this.db, bus, clock: this.clock });
    const server = await new Promise<http.Server>((resolve) => {
      const s = createHttpServer(gateway.listener).listen(0, "127.0.0.1", () => resolve(s));
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

/**
 * A TCP relay in front of Postgres that can hold the server's replies: a real
 * slow network, so a test can let a query run on the server and keep its
 * answer from the client until something else has happened.
 */
export interface HoldingProxy {
  /** `databaseUrl` with its host and port replaced by the relay's. */
  urlFor(databaseUrl: string): string;
  /** From now on the server's bytes are held, not forwarded. */
  hold(): void;
  /** Resolves once a whole reply (up to ReadyForQuery) is held: the server has run the query. */
  heldReply(): Promise<void>;
  /** Forwards the held bytes in order and stops holding. */
  release(): void;
  close(): Promise<void>;
}

export async function holdingProxy(databaseUrl: string): Promise<HoldingProxy> {
  const target = new URL(databaseUrl);
  let holding = false;
  let held: Array<{ client: net.Socket; chunk: Buffer }> = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined).on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.on("data", (chunk: Buffer) => (holding ? held.push({ client, chunk }) : client.write(chunk)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  /** Backend messages are a type byte and a length that counts itself; ReadyForQuery ('Z') ends every reply. */
  const holdsReadyForQuery = () => {
    const bytes = Buffer.concat(held.map((h) => h.chunk));
    for (let at = 0; at + 5 <= bytes.length; at += 1 + bytes.readInt32BE(at + 1)) {
      if (bytes[at] === 0x5a) return true;
    }
    return false;
  };

  return {
    urlFor(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    hold: () => {
      holding = true;
    },
    heldReply: async () => {
      const deadline = Date.now() + 5_000;
      while (!holdsReadyForQuery()) {
        if (Date.now() > deadline) throw new Error("no reply from Postgres within 5 s");
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    release: () => {
      holding = false;
      for (const { client, chunk } of held) client.write(chunk);
      held = [];
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
