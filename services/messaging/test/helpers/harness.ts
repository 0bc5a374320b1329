import { createHash } from "node:crypto";
import request from "supertest";
import { Bus, RpcCallError } from "@platform/bus";
import { CONTACTS_RPC, RPC, SUBJECTS, providerBatchSubject } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startSignedWebhookReceiver, startSimulator, type Simulator, type SimulatorOptions } from "@platform/provider-simulator";
import { startService, type RunningService, type ServiceDefinition } from "@platform/service";
import { collectSubject, createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { definition } from "../../src/service";

export const APP_SECRET = "test-app-secret";

/**
 * Stand-in for the gateway's provider side: verifies the provider's signature and stores the raw body on
 * JetStream exactly as the gateway does, so the simulator's callbacks reach the service the real way.
 */
function startProviderWebhookStandIn(bus: Bus) {
  return startSignedWebhookReceiver(APP_SECRET, async (body) => {
    await bus.publish(providerBatchSubject(JSON.parse(body)), { body, receivedAt: new Date().toISOString() }, {
      msgId: createHash("sha256").update(body).digest("hex"),
    });
  });
}

/**
 * Stand-in for the contacts service's request/reply subjects (a real
 * `bus.serve`, not a mock of ours): contacts keyed by (organization, phone)
 * and opt-outs keyed by (organization, channel, phone). `down` makes it answer
 * with a retryable error, as an unavailable contacts service would.
 */
export class ContactsStandIn implements ContactsBackend {
  readonly real = false;
  readonly contacts = new Map<string, { id: string; name?: string; waId?: string }>();
  readonly optOuts = new Set<string>();
  down = false;
  resolveCalls = 0;

  serve(bus: Bus): void {
    bus.serve(RPC.resolveContact, async (req) => {
      if (this.down) throw new RpcCallError("SERVICE_UNAVAILABLE", "contacts down", true);
      this.resolveCalls++;
      const key = `${req.organizationId}|${req.phone}`;
      let contact = this.contacts.get(key);
      const created = !contact;
      if (!contact) this.contacts.set(key, (contact = { id: newId("contact") }));
      if (req.name) contact.name = req.name;
      if (req.waId) contact.waId = req.waId;
      return { contactId: contact.id, phone: req.phone, created };
    });
    bus.serve(CONTACTS_RPC.resolveContacts, async (req) => {
      if (this.down) throw new RpcCallError("SERVICE_UNAVAILABLE", "contacts down", true);
      this.resolveCalls++;
      let created = 0;
      const contactIds = req.phones.map((phone, k) => {
        const key = `${req.organizationId}|${phone}`;
        let contact = this.contacts.get(key);
        if (!contact) {
          this.contacts.set(key, (contact = { id: newId("contact") }));
          created++;
        }
        if (req.names?.[k]) contact.name = req.names[k]!;
        if (req.waIds?.[k]) contact.waId = req.waIds[k]!;
        return contact.id;
      });
      return { contactIds, created };
    });
    bus.serve(RPC.checkOptOuts, async (req) => {
      if (this.down) throw new RpcCallError("SERVICE_UNAVAILABLE", "contacts down", true);
      return { optedOut: req.phones.filter((p) => this.optOuts.has(`${req.organizationId}|${req.messagingChannelId}|${p}`)) };
    });
  }

  async contactOf(organizationId: string, phone: string) {
    return this.contacts.get(`${organizationId}|${phone}`);
  }

  async optOut(organizationId: string, channelId: string, phone: string): Promise<void> {
    this.optOuts.add(`${organizationId}|${channelId}|${phone}`);
  }

  async setDown(down: boolean): Promise<void> {
    this.down = down;
  }

  async close(): Promise<void> {}
}

/** What the tests need of the contacts side, answered by the real service or the stand-in. */
export interface ContactsBackend {
  readonly real: boolean;
  contactOf(organizationId: string, phone: string): Promise<{ id: string; name?: string; waId?: string } | undefined>;
  optOut(organizationId: string, channelId: string, phone: string): Promise<void>;
  /** Makes the contacts RPCs unanswerable (real: the service is stopped), or back. */
  setDown(down: boolean): Promise<void>;
  close(): Promise<void>;
}

/** The real contacts service (`@platform/contacts`), in this process, on the same database and bus namespace. */
class RealContacts implements ContactsBackend {
  readonly real = true;
  private svc?: RunningService<unknown>;
  constructor(private readonly def: ServiceDefinition<any>, private readonly env: TestEnvironment) {}

  async start(): Promise<void> {
    this.svc = (await startService(this.def, {
      DATABASE_URL: this.env.databaseUrl,
      NATS_URL: this.env.natsUrl,
      BUS_NAMESPACE: this.env.namespace,
      INTERNAL_TOKEN: this.env.internalToken,
      PORT: "0",
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    }, { exitOnConfigError: false })) as RunningService<unknown>;
  }

  private headers(organizationId: string) {
    return { "x-internal-token": this.env.internalToken, "x-organization-id": organizationId };
  }

  async contactOf(organizationId: string, phone: string) {
    const res = await request(this.svc!.url).get("/api/v1/contacts?limit=100").set(this.headers(organizationId));
    if (res.status !== 200) throw new Error(`contacts list: ${res.status} ${JSON.stringify(res.body)}`);
    return (res.body.items as Array<{ id: string; phone: string; name?: string; waId?: string }>).find((c) => c.phone === phone);
  }

  async optOut(organizationId: string, channelId: string, phone: string): Promise<void> {
    const res = await request(this.svc!.url)
      .post("/api/v1/opt-outs")
      .set(this.headers(organizationId))
      .send({ action: "set", messagingChannelId: channelId, phone });
    if (res.status !== 200) throw new Error(`opt-out: ${res.status} ${JSON.stringify(res.body)}`);
  }

  async setDown(down: boolean): Promise<void> {
    if (down && this.svc) {
      await this.svc.stop();
      this.svc = undefined;
    } else if (!down && !this.svc) {
      await this.start();
    }
  }

  async close(): Promise<void> {
    await this.svc?.stop();
  }
}

/**
 * The real contacts service when its definition loads and boots (set
 * MESSAGING_TEST_CONTACTS=stand-in to force the stand-in), else the stand-in.
 */
async function startContacts(env: TestEnvironment, bus: Bus): Promise<ContactsBackend> {
  if (process.env.MESSAGING_TEST_CONTACTS !== "stand-in") {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { definition: contactsDefinition } = require("@platform/contacts") as { definition: ServiceDefinition<any> };
      const real = new RealContacts(contactsDefinition, env);
      await real.start();
      return real;
    } catch (err) {
      process.stderr.write(`messaging tests: real contacts service unavailable (${(err as Error).message}); using the stand-in\n`);
    }
  }
  const standIn = new ContactsStandIn();
  standIn.serve(bus);
  return standIn;
}

/**
 * The real template-jobs service (`@platform/template-jobs`, built), in this process, on the same database and bus
 * namespace: messaging asks it for a job's state before it retries one of the job's sends. Null when it cannot load
 * (not built): those retries then wait, as they would in production with template-jobs down.
 */
async function startTemplateJobs(env: TestEnvironment): Promise<RunningService<unknown> | null> {
  try {
    // Not a declared dependency (template-jobs' tests depend on messaging): resolved through the workspace.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { definition: jobsDefinition } = require("@platform/template-jobs") as { definition: ServiceDefinition<any> };
    return (await startService(jobsDefinition, {
      DATABASE_URL: env.databaseUrl,
      NATS_URL: env.natsUrl,
      BUS_NAMESPACE: env.namespace,
      INTERNAL_TOKEN: env.internalToken,
      PORT: "0",
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    }, { exitOnConfigError: false })) as RunningService<unknown>;
  } catch (err) {
    process.stderr.write(`messaging tests: template-jobs service unavailable (${(err as Error).message}); retried template sends will wait\n`);
    return null;
  }
}

export interface Harness {
  env: TestEnvironment;
  svc: RunningService<unknown>;
  sim: Simulator;
  bus: Bus;
  contacts: ContactsBackend;
  events: Awaited<ReturnType<typeof collectSubject>>;
  /** The gateway stand-in's `/provider/webhooks` URL. */
  webhookUrl: string;
  close(): Promise<void>;
}

export function serviceEnv(env: TestEnvironment, simUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return env.serviceEnv({ PROVIDER_BASE_URL: simUrl, PROVIDER_ACCESS_TOKEN: "test-provider-token", PROVIDER_TIMEOUT_MS: "1500", ...extra });
}

export type Infra = Omit<Harness, "svc">;

/** Postgres, NATS, the simulator and the gateway and contacts stand-ins: everything around messaging. */
export async function startInfra(label: string, simOptions: Partial<SimulatorOptions> = {}): Promise<Infra> {
  const env = await createTestEnvironment(label);
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "messaging-test", log: createLogger("test", "silent") });
  await bus.ensureStreams();
  const contacts = await startContacts(env, bus);
  const templateJobs = await startTemplateJobs(env);
  const gateway = await startProviderWebhookStandIn(bus);
  const sim = await startSimulator({
    webhookUrl: gateway.url,
    appSecret: APP_SECRET,
    accessToken: "test-provider-token",
    statusDelaysMs: { sent: 30, delivered: 60, read: 90 },
    ...simOptions,
  });
  const events = await collectSubject(env.natsUrl, `${env.namespace}.evt.>`);
  return {
    env,
    sim,
    bus,
    contacts,
    events,
    webhookUrl: gateway.url,
    async close() {
      await templateJobs?.stop();
      await contacts.close();
      await events.close();
      await sim.close();
      await gateway.close();
      await bus.close();
      await env.cleanup();
    },
  };
}

/** The infrastructure and messaging itself, in this process. */
export async function startHarness(label = "msg", extraEnv: Record<string, string> = {}, simOptions: Partial<SimulatorOptions> = {}): Promise<Harness> {
  const infra = await startInfra(label, simOptions);
  const svc = await startService(definition, serviceEnv(infra.env, infra.sim.url, extraEnv), { exitOnConfigError: false });
  return {
    ...infra,
    svc: svc as RunningService<unknown>,
    async close() {
      await svc.stop();
      await infra.close();
    },
  };
}

/** supertest with the gateway's internal headers for one organization. */
export function api(h: Harness, organizationId: string) {
  const headers = { "x-internal-token": h.env.internalToken, "x-organization-id": organizationId };
  const agent = request(h.svc.url);
  return {
    get: (path: string) => agent.get(path).set(headers),
    post: (path: string) => agent.post(path).set(headers),
    patch: (path: string) => agent.patch(path).set(headers),
  };
}

let pnidSeq = 0;
export const uniquePhoneNumberId = () => `pn${Date.now().toString(36)}${(pnidSeq++).toString(36)}${Math.floor(Math.random() * 1e6)}`;

let phoneSeq = Math.floor(Math.random() * 1_000_000);
/** A fresh, valid US number per call: +1 555 01x xxxx style (possible numbers). */
export const uniquePhone = () => `+1415${String(2_000_000 + (phoneSeq++ % 7_000_000)).padStart(7, "0")}`;

export async function createChannel(h: Harness, organizationId: string, overrides: Record<string, unknown> = {}) {
  const res = await api(h, organizationId)
    .post(`/admin/v1/organizations/${organizationId}/channels`)
    .send({ name: "Main", phoneNumber: "+14155550100", providerPhoneNumberId: uniquePhoneNumberId(), ...overrides });
  if (res.status !== 201) throw new Error(`channel create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; providerPhoneNumberId: string; isDefault: boolean; connected: boolean; messagesPerSecond: number; phoneNumber: string };
}

/** Events of a type collected so far (optionally filtered on data). */
export function eventsOf(h: Pick<Harness, "events">, type: string, where: (data: any) => boolean = () => true): any[] {
  return h.events.received.filter((e) => e.data?.event === type && where(e.data.data)).map((e) => e.data);
}

/** An inbound message through the simulator, the gateway stand-in and the consumer; resolves once stored. */
export async function receiveInbound(
  h: Harness,
  channel: { id: string; providerPhoneNumberId: string },
  from: string,
  opts: { text?: string; button?: { text: string; payload: string }; name?: string; timestamp?: number; id?: string } = {},
): Promise<string> {
  const id = await h.sim.injectInbound({
    phoneNumberId: channel.providerPhoneNumberId,
    from,
    ...(opts.button ? { button: opts.button } : { text: opts.text ?? "hello" }),
    ...(opts.name ? { name: opts.name } : {}),
    ...(opts.timestamp !== undefined ? { timestamp: opts.timestamp } : {}),
    ...(opts.id ? { id: opts.id } : {}),
  });
  await eventually(() => eventsOf(h, "message.received", (d) => d.providerMessageId === id).length > 0, 10_000);
  return id;
}

/** A new organization with a channel, and a phone that wrote in on it: its 24-hour window is open for sends. */
export async function openWindow(h: Harness): Promise<{ org: string; channel: Awaited<ReturnType<typeof createChannel>>; phone: string }> {
  const org = newOrg();
  const channel = await createChannel(h, org);
  const phone = uniquePhone();
  await receiveInbound(h, channel, phone);
  return { org, channel, phone };
}

/** A signed-batch body as the provider sends it: one `messages` change for one phone number id. */
export function messagesBatch(phoneNumberId: string, value: { contacts?: unknown[]; messages?: unknown[]; statuses?: unknown[] }) {
  return {
    object: "whatsapp_business_account",
    entry: [{ id: "waba", changes: [{ field: "messages", value: { metadata: { phone_number_id: phoneNumberId }, ...value } }] }],
  };
}

/** Provider requests the simulator recorded for one of our message ids. */
export const providerRequestsFor = (h: Pick<Harness, "sim">, messageId: string) =>
  h.sim.requests.filter((r) => (r.body as { biz_opaque_callback_data?: string })?.biz_opaque_callback_data === messageId);

export const newOrg = () => newId("organization");

let shared: Promise<Harness> | undefined;
/** One harness for the whole run (each test uses its own organization); closed by the root hook in root.test.ts. */
export function sharedHarness(): Promise<Harness> {
  shared ??= startHarness("msg");
  return shared;
}
export async function closeSharedHarness(): Promise<void> {
  if (shared) await (await shared).close();
  shared = undefined;
}
