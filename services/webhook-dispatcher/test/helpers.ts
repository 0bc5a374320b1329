import http, { type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import request from "supertest";
import { Bus } from "@platform/bus";
import { eventSubject, type EventType } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startService, type RunningService, type ServiceEnv } from "@platform/service";
import { createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { definition, type envShape } from "../src/service";

export type Svc = RunningService<ServiceEnv<typeof envShape>>;

export interface Stack {
  env: TestEnvironment;
  svc: Svc;
  bus: Bus;
  admin(org: string): {
    post(path: string, body?: object): request.Test;
    get(path: string): request.Test;
    patch(path: string, body: object): request.Test;
    del(path: string): request.Test;
  };
  publish(type: EventType, organizationId: string, data?: Record<string, unknown>): Promise<string>;
  stop(): Promise<void>;
}

/** The test environment's service variables, with loopback receivers allowed and short delays (150 ms retries, 1 s timeout). */
export function serviceEnv(env: TestEnvironment, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return env.serviceEnv({
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WEBHOOK_RETRY_DELAYS_MS: "150,150,150",
    WEBHOOK_TIMEOUT_MS: "1000",
    ...extra,
  });
}

export function adminClient(url: string, token: string) {
  return (org: string) => {
    const base = `/admin/v1/organizations/${org}/webhooks`;
    const auth = (t: request.Test) => t.set("x-internal-token", token).set("x-organization-id", org);
    return {
      post: (path: string, body?: object) => auth(request(url).post(base + path)).send(body ?? {}),
      get: (path: string) => auth(request(url).get(base + path)),
      patch: (path: string, body: object) => auth(request(url).patch(base + path)).send(body),
      del: (path: string) => auth(request(url).delete(base + path)),
    };
  };
}

export async function publishEvent(
  bus: Bus,
  type: EventType,
  organizationId: string,
  data: Record<string, unknown> = {},
  at: Date = new Date(),
): Promise<string> {
  const id = newId("event");
  await bus.publish(
    eventSubject(type),
    { event: type, timestamp: at.toISOString(), organizationId, data: { id, messageId: newId("message"), ...data } },
    { msgId: id },
  );
  return id;
}

export async function startStack(label: string, extra: Record<string, string> = {}, env?: TestEnvironment): Promise<Stack> {
  const testEnv = env ?? (await createTestEnvironment(label));
  const svc = await startService(definition, serviceEnv(testEnv, extra), { exitOnConfigError: false });
  const bus = await Bus.connect({ url: testEnv.natsUrl, namespace: testEnv.namespace, name: "test-publisher", log: createLogger("test", "silent") });
  return {
    env: testEnv,
    svc,
    bus,
    admin: adminClient(svc.url, testEnv.internalToken),
    publish: (type, org, data) => publishEvent(bus, type, org, data),
    stop: async () => {
      await bus.close();
      await svc.stop();
      if (!env) await testEnv.cleanup();
    },
  };
}

export interface Received {
  raw: Buffer;
  headers: IncomingHttpHeaders;
  body: any;
  path: string;
  at: number;
}

export interface Reply {
  status?: number;
  body?: string;
  delayMs?: number;
  headers?: Record<string, string>;
}

/** A real HTTP receiver on loopback; it keeps the raw bytes as a receiver must. */
export class Receiver {
  readonly requests: Received[] = [];
  respond: (r: Received, index: number) => Reply = () => ({ status: 200, body: "ok" });
  private server!: http.Server;
  url = "";

  static async start(respond?: Receiver["respond"]): Promise<Receiver> {
    const r = new Receiver();
    if (respond) r.respond = respond;
    r.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const raw = Buffer.concat(chunks);
        let body: unknown = null;
        try {
          body = JSON.parse(raw.toString("utf8"));
        } catch {
          body = null;
        }
        const received: Received = { raw, headers: req.headers, body, path: req.url ?? "/", at: Date.now() };
        const index = r.requests.push(received) - 1;
        const reply = r.respond(received, index);
        const send = () => {
          if (res.destroyed) return;
          res.writeHead(reply.status ?? 200, { "content-type": "text/plain", ...(reply.headers ?? {}) });
          res.end(reply.body ?? "");
        };
        if (reply.delayMs) setTimeout(send, reply.delayMs).unref();
        else send();
      });
    });
    await new Promise<void>((resolve) => r.server.listen(0, "127.0.0.1", resolve));
    r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
    return r;
  }

  byEvent(eventId: string): Received[] {
    return this.requests.filter((q) => q.body?.data?.id === eventId);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the webhook has no delivery job left: each of its deliveries succeeded or was given up, and the job row
 * is gone, so no further attempt can follow and counts taken afterwards are final. A positive marker for "no more
 * retries" instead of a fixed sleep.
 */
export async function jobsSettled(stack: Stack, webhookId: string): Promise<void> {
  await eventually(async () => {
    const rows = await stack.svc.deps.db.query(`SELECT count(*)::int AS n FROM webhooks.delivery_jobs WHERE webhook_id = $1`, [webhookId]);
    return rows[0].n === 0;
  }, 15_000);
}
export { eventually, newId };
