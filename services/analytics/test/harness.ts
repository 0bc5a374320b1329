/**
 * One analytics service and one test bus for the whole run (mocha root
 * hooks), against the real Postgres and NATS, in a database and bus
 * namespace of its own. Tests publish the message events on the real bus as
 * messaging's outbox relay does, and isolate themselves with a fresh
 * organization id.
 */
import request from "supertest";
import { Bus, domainEvent } from "@platform/bus";
import type { OutboundStatus } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startService, type RunningService } from "@platform/service";
import { createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { definition } from "../src/service";
import type { AnalyticsEnv } from "../src/use-cases/context";

export interface Harness {
  env: TestEnvironment;
  svc: RunningService<AnalyticsEnv>;
  /** The test's own connection to the bus (publishing events). */
  bus: Bus;
}

let current: Harness | undefined;

export function harness(): Harness {
  if (!current) throw new Error("harness not started");
  return current;
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    const env = await createTestEnvironment("analytics");
    const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "analytics-test", log: createLogger("analytics-test", "silent") });
    await bus.ensureStreams();
    // Small batches, so that a test's events span several of them.
    const svc = await startService(definition, env.serviceEnv({ ANALYTICS_BATCH_MAX: "50" }), { exitOnConfigError: false });
    current = { env, svc, bus };
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    if (!current) return;
    await current.svc.stop();
    await current.bus.close();
    await current.env.cleanup();
    current = undefined;
  },
};

export const newOrg = () => newId("organization");
export const newMessageId = () => newId("message");

/** A supertest call with the gateway's headers for `organizationId`. */
export function api(organizationId: string) {
  const h = harness();
  const headers = { "x-internal-token": h.env.internalToken, "x-organization-id": organizationId };
  return { get: (path: string) => request(h.svc.url).get(path).set(headers) };
}

export async function analytics(organizationId: string, startDate: string, endDate: string) {
  const res = await api(organizationId).get(`/api/v1/analytics?startDate=${encodeURIComponent(startDate)}&endDate=${encodeURIComponent(endDate)}`);
  if (res.status !== 200) throw new Error(`analytics answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The event messaging's outbox relay publishes for a status change of one outbound message. */
export function statusEvent(organizationId: string, messageId: string, createdAt: string, status: Exclude<OutboundStatus, "pending">) {
  return domainEvent(`message.${status}`, organizationId, {
    messageId,
    conversationId: "conv_test",
    contactId: "ct_test",
    messagingChannelId: "ch_test",
    phone: "+15550001111",
    status,
    providerMessageId: `wamid.${messageId}`,
    ...(status === "failed" ? { error: { code: "131026", title: "Message undeliverable" } } : {}),
    createdAt,
  });
}

/** Publishes events in order; `msgId: false` publishes without a JetStream message id (a duplicate the stream cannot drop). */
export async function publish(events: ReturnType<typeof statusEvent>[], opts: { msgId?: boolean } = {}): Promise<void> {
  for (const e of events) await harness().bus.publish(e.subject, e.payload, opts.msgId === false ? {} : { msgId: e.msgId });
}

/**
 * Waits until everything published before this call has been applied: a
 * sentinel message of a throwaway organization is published last and the
 * consumer applies the stream in order.
 */
export async function settle(): Promise<void> {
  const org = newOrg();
  const at = "2001-01-01T00:00:00.000Z";
  await publish([statusEvent(org, newMessageId(), at, "sent")]);
  await eventually(async () => (await analytics(org, "2001-01-01", "2001-01-01")).outboundMessages.total === 1, 20_000);
}

/** Counts of an answer, as a plain object. */
export const counts = (body: any) => body.outboundMessages.counts as Record<string, number>;
