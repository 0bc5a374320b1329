/**
 * The world around template-jobs, in this process, against the real Postgres
 * and NATS (own database and bus namespace): the real messaging service
 * (channels, pacing, the template send responder), the real contacts
 * service (opt-outs), the provider simulator, a stand-in for the gateway's
 * provider webhook (it stores the raw batch on `provider.inbound.v1` exactly
 * as the gateway does), and template-jobs.
 */
import { createHash } from "node:crypto";
import request from "supertest";
import { Bus } from "@platform/bus";
import { SUBJECTS, toProviderDigits } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startSignedWebhookReceiver, startSimulator, type Simulator } from "@platform/provider-simulator";
import { startService, type RunningService, type ServiceDefinition } from "@platform/service";
import { collectSubject, createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { definition } from "../../src/service";

export const APP_SECRET = "test-app-secret";
export const TEMPLATE_ACCOUNT_ID = "waba_test_1";

/**
 * Stand-in for the gateway's provider side: verifies the provider's signature and stores the raw body on
 * JetStream exactly as the gateway does, so the simulator's callbacks reach the service the real way.
 */
function startProviderWebhookStandIn(bus: Bus) {
  return startSignedWebhookReceiver(APP_SECRET, async (body) => {
    await bus.publish(SUBJECTS.providerInbound.subject, { body, receivedAt: new Date().toISOString() }, {
      msgId: createHash("sha256").update(body).digest("hex"),
    });
  });
}

export interface Harness {
  env: TestEnvironment;
  bus: Bus;
  sim: Simulator;
  /** Where the simulator posts its status callbacks (`sim.setWebhookUrl(undefined)` stops them; this brings them back). */
  providerWebhookUrl: string;
  messaging: RunningService<unknown>;
  contacts: RunningService<unknown>;
  svc: RunningService<any>;
  events: Awaited<ReturnType<typeof collectSubject>>;
  /** Starts another template-jobs replica (same database and bus). */
  startReplica(extra?: Record<string, string>): Promise<RunningService<any>>;
  /** Stops the current template-jobs process and starts a fresh one (a crash and a pod restart). */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export const SERVICE_ENV = { JOB_POLL_MS: "50", JOB_LEASE_MS: "3000", RPC_TIMEOUT_MS: "5000", SEND_BATCH_TIMEOUT_MS: "10000" };

export async function startHarness(label = "tj"): Promise<Harness> {
  const env = await createTestEnvironment(label);
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "template-jobs-test", log: createLogger("test", "silent") });
  await bus.ensureStreams();
  const gateway = await startProviderWebhookStandIn(bus);
  const sim = await startSimulator({
    webhookUrl: gateway.url,
    appSecret: APP_SECRET,
    accessToken: "test-provider-token",
    templateAccountId: TEMPLATE_ACCOUNT_ID,
    statusDelaysMs: { sent: 30, delivered: 60, read: 90 },
  });
  /* eslint-disable @typescript-eslint/no-require-imports */
  const contactsDef = (require("@platform/contacts") as { definition: ServiceDefinition<any> }).definition;
  const messagingDef = (require("@platform/messaging") as { definition: ServiceDefinition<any> }).definition;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const contacts = (await startService(contactsDef, env.serviceEnv(), { exitOnConfigError: false })) as RunningService<unknown>;
  const messaging = (await startService(
    messagingDef,
    // A call unanswered within 1.5 s is still read for 44 s (PROVIDER_UNANSWERED_RETRY_MS less 1 s): long enough for a test
    // to cancel its job (up to CANCEL_WAIT_MS) before the provider's held answer is released.
    env.serviceEnv({ PROVIDER_BASE_URL: sim.url, PROVIDER_ACCESS_TOKEN: "test-provider-token", PROVIDER_TIMEOUT_MS: "1500", PROVIDER_UNANSWERED_RETRY_MS: "45000" }),
    { exitOnConfigError: false },
  )) as RunningService<unknown>;
  const events = await collectSubject(env.natsUrl, `${env.namespace}.evt.>`);
  const replicas: Array<RunningService<any>> = [];
  const startReplica = async (extra: Record<string, string> = {}) => {
    const r = await startService(definition, env.serviceEnv({ ...SERVICE_ENV, ...extra }), { exitOnConfigError: false });
    // Stopping twice (a test, then the harness) stops once.
    let stopped: Promise<void> | undefined;
    const stop = r.stop;
    r.stop = () => (stopped ??= stop());
    replicas.push(r);
    return r;
  };
  const h: Harness = {
    env,
    bus,
    sim,
    providerWebhookUrl: gateway.url,
    messaging,
    contacts,
    svc: await startReplica(),
    events,
    startReplica,
    async restart() {
      await h.svc.stop();
      h.svc = await startReplica();
    },
    async close() {
      for (const r of replicas) await r.stop().catch(() => undefined);
      await messaging.stop();
      await contacts.stop();
      await events.close();
      await sim.close();
      await gateway.close();
      await bus.close();
      await env.cleanup();
    },
  };
  return h;
}

let shared: Promise<Harness> | undefined;
export function sharedHarness(): Promise<Harness> {
  shared ??= startHarness("tj");
  return shared;
}
export async function closeSharedHarness(): Promise<void> {
  if (shared) await (await shared).close();
  shared = undefined;
}

export const newOrg = () => newId("organization");

/** supertest against a service with the gateway's internal headers for one organization. */
export function api(h: Harness, organizationId: string, svc: RunningService<unknown> = h.svc) {
  const headers = { "x-internal-token": h.env.internalToken, "x-organization-id": organizationId };
  const agent = request(svc.url);
  return {
    get: (path: string) => agent.get(path).set(headers),
    post: (path: string) => agent.post(path).set(headers),
    patch: (path: string) => agent.patch(path).set(headers),
  };
}

let seq = 0;
const unique = () => `${Date.now().toString(36)}${(seq++).toString(36)}${Math.floor(Math.random() * 1e6)}`;
let phoneSeq = Math.floor(Math.random() * 1_000_000);
/** A fresh, valid US number per call. */
export const uniquePhone = () => `+1415${String(2_000_000 + (phoneSeq++ % 7_000_000)).padStart(7, "0")}`;
let providerIdSeq = Math.floor(Math.random() * 1e9);
export const uniqueProviderTemplateId = () => String(1_000_000_000 + providerIdSeq++);

/** A channel of the organization, created through messaging's admin API. */
export async function createChannel(h: Harness, organizationId: string, overrides: Record<string, unknown> = {}) {
  const res = await api(h, organizationId, h.messaging)
    .post(`/admin/v1/organizations/${organizationId}/channels`)
    .send({ name: "Main", phoneNumber: "+14155550100", providerPhoneNumberId: `pn${unique()}`, messagesPerSecond: 1000, ...overrides });
  if (res.status !== 201) throw new Error(`channel create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; providerPhoneNumberId: string; messagesPerSecond: number };
}

export async function createTemplate(h: Harness, organizationId: string, overrides: Record<string, unknown> = {}) {
  const res = await api(h, organizationId)
    .post(`/admin/v1/organizations/${organizationId}/templates`)
    .send({
      name: `promo_${unique()}`,
      language: "en_US",
      status: "approved",
      bodyParameterCount: 1,
      providerTemplateId: uniqueProviderTemplateId(),
      templateAccountId: TEMPLATE_ACCOUNT_ID,
      ...overrides,
    });
  if (res.status !== 201) throw new Error(`template create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; name: string; language: string; providerTemplateId: string; templateAccountId: string; status: string };
}

/** An organization with a channel and an approved one-parameter template. */
export async function setup(h: Harness, templateOverrides: Record<string, unknown> = {}, channelOverrides: Record<string, unknown> = {}) {
  const org = newOrg();
  const channel = await createChannel(h, org, channelOverrides);
  const template = await createTemplate(h, org, templateOverrides);
  return { org, channel, template };
}

export async function optOut(h: Harness, organizationId: string, channelId: string, phone: string): Promise<void> {
  const res = await api(h, organizationId, h.contacts).post("/api/v1/opt-outs").send({ action: "set", messagingChannelId: channelId, phone });
  if (res.status !== 200) throw new Error(`opt-out: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Provider sends to one number so far: the simulator's accepted template requests. */
export function sendsTo(h: Harness, phone: string): number {
  return templateRequestsTo(h, phone).filter((r) => r.responseStatus === 200).length;
}

/** Template requests the simulator recorded for one number (accepted or not). */
export function templateRequestsTo(h: Harness, phone: string) {
  const digits = toProviderDigits(phone);
  return h.sim.requests.filter((r) => (r.body as { to?: string; type?: string })?.to === digits && (r.body as { type?: string }).type === "template");
}

export async function getJob(h: Harness, organizationId: string, jobId: string) {
  const res = await api(h, organizationId).get(`/api/v1/templates/send/${jobId}`);
  if (res.status !== 200) throw new Error(`job get: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; status: string; sent: number; failed: number; skipped: number; recipients: number; startedAt: string | null; completedAt: string | null; scheduledFor: string | null };
}

export async function waitForJob(h: Harness, organizationId: string, jobId: string, status: string, timeoutMs = 20_000) {
  return eventually(async () => {
    const job = await getJob(h, organizationId, jobId);
    return job.status === status ? job : undefined;
  }, timeoutMs);
}

/** Events of a type collected so far (optionally filtered on data). */
export function eventsOf(h: Harness, type: string, where: (data: any) => boolean = () => true): any[] {
  return h.events.received.filter((e) => e.data?.event === type && where(e.data.data)).map((e) => e.data);
}

export const recipients = (phones: string[], params = 1) => phones.map((phone, i) => ({ phone, bodyParameters: Array.from({ length: params }, (_, k) => `v${i}_${k}`) }));
