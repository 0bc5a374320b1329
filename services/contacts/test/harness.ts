/**
 * One contacts service, one test bus and one event collector for the whole
 * run (mocha root hooks), against the real Postgres and NATS, in a database
 * and bus namespace of its own. Each test isolates itself with a fresh
 * organization id.
 *
 * Channels belong to messaging, which is built beside this service: the
 * harness answers RPC.lookupChannel from a real `bus.serve` with the channels
 * a test registered (a stand-in for an unfinished neighbour, not a mock of
 * contacts), and tests may also publish sys.channel.upserted on the real bus.
 */
import request from "supertest";
import { Bus } from "@platform/bus";
import { RPC, SUBJECTS, type Channel } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startService, type RunningService } from "@platform/service";
import { collectSubject, createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { definition } from "../src/service";
import type { ContactsEnv } from "../src/use-cases/context";

export interface Harness {
  env: TestEnvironment;
  svc: RunningService<ContactsEnv>;
  /** The test's own connection to the bus (publishing events, calling the RPCs). */
  bus: Bus;
  /** Every domain event published in this run's namespace. */
  events: Array<{ subject: string; data: any }>;
  /** Channels that the RPC.lookupChannel stand-in knows, by id. */
  channels: Map<string, Channel & { organizationId: string }>;
  /** Channel ids whose lookup never answers in time (to provoke 503). */
  silentChannels: Set<string>;
}

let current: Harness | undefined;
let closeEvents: (() => Promise<void>) | undefined;

export function harness(): Harness {
  if (!current) throw new Error("harness not started");
  return current;
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    const env = await createTestEnvironment("contacts");
    const channels = new Map<string, Channel & { organizationId: string }>();
    const silentChannels = new Set<string>();
    const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "contacts-test", log: createLogger("contacts-test", "silent") });
    await bus.ensureStreams();
    bus.serve(RPC.lookupChannel, async ({ organizationId, channelId }) => {
      if (silentChannels.has(channelId)) await new Promise((r) => setTimeout(r, 5_000));
      const channel = channels.get(channelId);
      // Messaging answers null for a channel of another organization.
      return { channel: channel && channel.organizationId === organizationId ? channel : null };
    });
    const collector = await collectSubject(env.natsUrl, `${env.namespace}.evt.>`);
    closeEvents = collector.close;
    const svc = await startService(
      definition,
      env.serviceEnv({ CHANNEL_LOOKUP_TIMEOUT_MS: "500" }),
      { exitOnConfigError: false },
    );
    current = { env, svc, bus, events: collector.received as Harness["events"], channels, silentChannels };
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    if (!current) return;
    await current.svc.stop();
    await closeEvents?.();
    await current.bus.close();
    await current.env.cleanup();
    current = undefined;
  },
};

export const newOrg = () => newId("organization");

/** A supertest agent call with the gateway's headers for `organizationId`. */
export function api(organizationId: string) {
  const h = harness();
  const headers = { "x-internal-token": h.env.internalToken, "x-organization-id": organizationId };
  const r = request(h.svc.url);
  return {
    get: (path: string) => r.get(path).set(headers),
    post: (path: string, body?: unknown) => (body === undefined ? r.post(path).set(headers) : r.post(path).set(headers).send(body as object)),
  };
}

/** A channel of `organizationId` that messaging knows (answered by the lookup stand-in). */
export function registerChannel(organizationId: string, overrides: Partial<Channel> = {}): Channel & { organizationId: string } {
  const now = new Date().toISOString();
  const channel = {
    id: newId("channel"),
    name: "Main line",
    phoneNumber: "+15550009999",
    providerPhoneNumberId: `pn_${Math.random().toString(36).slice(2)}`,
    connected: true,
    isDefault: true,
    messagesPerSecond: 80,
    createdAt: now,
    updatedAt: now,
    ...overrides,
    organizationId,
  };
  harness().channels.set(channel.id, channel);
  return channel;
}

/** Publishes sys.channel.upserted as messaging does. */
export async function publishChannel(channel: Channel & { organizationId: string }): Promise<void> {
  await harness().bus.publish(SUBJECTS.channelUpserted.subject, channel, { msgId: `${channel.id}:${channel.updatedAt}` });
}

export async function resolveContact(organizationId: string, phone: string, extra: { name?: string; waId?: string } = {}) {
  return harness().bus.request(RPC.resolveContact, { organizationId, phone, ...extra });
}

export async function checkOptOuts(organizationId: string, messagingChannelId: string, phones: string[]) {
  return (await harness().bus.request(RPC.checkOptOuts, { organizationId, messagingChannelId, phones }, { timeoutMs: 10_000 })).optedOut;
}

/** optout.created events of one organization seen on the bus so far. */
export function optOutEvents(organizationId: string) {
  return harness()
    .events.filter((e) => e.data?.event === "optout.created" && e.data.organizationId === organizationId)
    .map((e) => e.data);
}

/**
 * `optOutEvents(org)` once every event committed so far has surely been seen: a positive marker for a negative
 * assertion instead of a fixed sleep. It sets an opt-out on a fresh phone and channel of the organization and waits for
 * that optout.created; the outbox relays in commit order, so every earlier event came before it. The marker's own
 * event is left out of the answer.
 */
export async function optOutEventsSettled(organizationId: string) {
  const channel = registerChannel(organizationId, { isDefault: false });
  const phone = newPhone();
  const res = await api(organizationId).post("/api/v1/opt-outs", { action: "set", messagingChannelId: channel.id, phone });
  if (res.status !== 200) throw new Error(`marker opt-out answered ${res.status}`);
  await eventually(() => optOutEvents(organizationId).some((e) => e.data.phone === phone));
  return optOutEvents(organizationId).filter((e) => e.data.phone !== phone);
}

/** A fresh E.164 number (+1 415 xxx xxxx), unique within the run. */
let phoneCounter = Math.floor(Math.random() * 5_000_000);
export function newPhone(): string {
  phoneCounter++;
  return `+1415${String(phoneCounter).padStart(7, "0")}`;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
