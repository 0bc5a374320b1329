/**
 * The bus catalog: every stream, subject and request/reply pair, with the zod
 * schema of its payload. Subjects are dotted lowercase with a version. The bus
 * package prefixes all of them (and stream names) with BUS_NAMESPACE, so test
 * runs sharing one NATS never see each other.
 */
import { z } from "zod";
import { Channel, Organization, RateLimit } from "./admin";
import { DomainEvent, EventType } from "./events";

export interface StreamDef {
  name: string;
  subjects: string[];
  /** JetStream duplicate window: publishes with the same msgID inside it are dropped. */
  duplicateWindowMs: number;
  maxAgeMs: number;
}

export const STREAMS = {
  /** Domain events (`evt.<type>.v1`), consumed by webhooks, analytics, contacts. */
  events: { name: "EVENTS", subjects: ["evt.>"], duplicateWindowMs: 5 * 60_000, maxAgeMs: 7 * 24 * 3_600_000 },
  /** Internal facts other services copy locally (organizations, channels). */
  system: { name: "SYSTEM", subjects: ["sys.>"], duplicateWindowMs: 5 * 60_000, maxAgeMs: 30 * 24 * 3_600_000 },
  /** Raw provider webhook batches, stored before the gateway answers 200. */
  provider: { name: "PROVIDER_INBOUND", subjects: ["provider.>"], duplicateWindowMs: 10 * 60_000, maxAgeMs: 7 * 24 * 3_600_000 },
  /** Durable work items of the services themselves (retries with nak(delay)). */
  work: { name: "WORK", subjects: ["work.>"], duplicateWindowMs: 2 * 60_000, maxAgeMs: 2 * 24 * 3_600_000 },
  /** Messages a consumer gave up on (poison payloads, retries exhausted), kept for inspection and replay. */
  deadLetter: { name: "DEAD_LETTER", subjects: ["dlq.>"], duplicateWindowMs: 60_000, maxAgeMs: 30 * 24 * 3_600_000 },
} as const satisfies Record<string, StreamDef>;

export interface SubjectDef<S extends z.ZodType> {
  subject: string;
  schema: S;
}
const subject = <S extends z.ZodType>(name: string, schema: S): SubjectDef<S> => ({ subject: name, schema });

export interface RpcDef<Req extends z.ZodType, Res extends z.ZodType> {
  subject: string;
  request: Req;
  response: Res;
}
const rpc = <Req extends z.ZodType, Res extends z.ZodType>(name: string, request: Req, response: Res): RpcDef<Req, Res> => ({
  subject: name,
  request,
  response,
});

/** Subject of a domain event type: `evt.message.sent.v1`. */
export const eventSubject = (type: EventType) => `evt.${type}.v1`;

export const OrganizationUpserted = Organization.extend({ deleted: z.boolean().default(false) });
export const ChannelUpserted = Channel.extend({ organizationId: z.string() });
export const ApiKeyRevoked = z.object({ keyId: z.string(), organizationId: z.string() });
export const ProviderInboundBatch = z.object({
  /** The raw body exactly as the provider signed it. */
  body: z.string(),
  receivedAt: z.string(),
});

export const SUBJECTS = {
  /** Any domain event; `evt.>` for consumers of all. */
  events: subject("evt.>", DomainEvent),
  organizationUpserted: subject("sys.organization.upserted.v1", OrganizationUpserted),
  channelUpserted: subject("sys.channel.upserted.v1", ChannelUpserted),
  /** Core NATS broadcast: every gateway replica evicts the key from its cache. */
  apiKeyRevoked: subject("bcast.apikey.revoked.v1", ApiKeyRevoked),
  /** Core NATS broadcast: every gateway replica drops its cached policy (plan, rate limit) of the organization. */
  organizationChanged: subject("bcast.organization.changed.v1", z.object({ organizationId: z.string() })),
  /**
   * Core NATS broadcast of rate-limit consumption between gateway replicas (ADR 0002): requests admitted per
   * organization since the sender's last message, and (optional, added later) each one's limit, so a replica that has
   * not served the organization yet opens its bucket with that usage instead of ignoring it.
   */
  rateLimitUsage: subject(
    "bcast.ratelimit.usage.v1",
    z.object({ replica: z.string(), counts: z.record(z.string(), z.number()), limits: z.record(z.string(), RateLimit).optional() }),
  ),
  /** Verified provider batches with status callbacks, template status changes or anything else but inbound messages only. */
  providerInbound: subject("provider.inbound.v1", ProviderInboundBatch),
  /**
   * Verified provider batches that carry inbound messages and nothing else (`providerBatchSubject`): their processing
   * may wait while the stack serves requests and is short of CPU (ADR 0010); nothing that settles a send is here.
   */
  providerMessages: subject("provider.messages.v1", ProviderInboundBatch),
  /**
   * Core NATS broadcast, at most every 250 ms per process while it serves HTTP requests (the integrators' API, the
   * admin API, the console): background consumers of every process yield the CPU while it is short (ADR 0010).
   */
  loadServing: subject("bcast.load.serving.v1", z.object({ service: z.string() })),
} as const;

/**
 * The subject a verified provider batch is stored on: `provider.messages.v1` when every change of every entry is a
 * `messages` change with inbound messages and no status callback, else `provider.inbound.v1`. Status callbacks
 * settle sends whose provider answer was lost (a crash, a timeout), so they must never wait behind inbound messages
 * held back under load; template status changes are read from `provider.inbound.v1` by template-jobs.
 */
export function providerBatchSubject(body: unknown): string {
  const entries = (body as { entry?: unknown } | null)?.entry;
  if (!Array.isArray(entries) || entries.length === 0) return SUBJECTS.providerInbound.subject;
  let messages = 0;
  for (const entry of entries) {
    const changes = (entry as { changes?: unknown } | null)?.changes;
    if (!Array.isArray(changes) || changes.length === 0) return SUBJECTS.providerInbound.subject;
    for (const change of changes) {
      const c = change as { field?: unknown; value?: { messages?: unknown; statuses?: unknown } } | null;
      if (c?.field !== "messages" || !c.value || c.value.statuses !== undefined) return SUBJECTS.providerInbound.subject;
      if (!Array.isArray(c.value.messages) || c.value.messages.length === 0) return SUBJECTS.providerInbound.subject;
      messages += c.value.messages.length;
    }
  }
  return messages > 0 ? SUBJECTS.providerMessages.subject : SUBJECTS.providerInbound.subject;
}

/**
 * Whether a provider retry of this batch may be dropped by its body's hash (JetStream's duplicate window): only when
 * every change is a `messages` change (inbound messages, status callbacks), which the consumers dedupe anyway by
 * provider message id and status. Any other change (a template's status first of all) carries no id or timestamp of
 * its own: the same bytes again are a new change (APPROVED, PAUSED, APPROVED again), and its consumer ignores a status
 * the template already has.
 */
export function providerBatchDedupable(body: unknown): boolean {
  const entries = (body as { entry?: unknown } | null)?.entry;
  if (!Array.isArray(entries)) return false;
  for (const entry of entries) {
    const changes = (entry as { changes?: unknown } | null)?.changes;
    if (!Array.isArray(changes)) return false;
    for (const change of changes) if ((change as { field?: unknown } | null)?.field !== "messages") return false;
  }
  return true;
}

export const ResolveContactRequest = z.object({
  organizationId: z.string(),
  phone: z.string(),
  name: z.string().optional(),
  waId: z.string().optional(),
});
export const ResolveContactResponse = z.object({ contactId: z.string(), phone: z.string(), created: z.boolean() });

export const OptOutCheckRequest = z.object({
  organizationId: z.string(),
  messagingChannelId: z.string(),
  phones: z.array(z.string()).min(1).max(100_000),
});
export const OptOutCheckResponse = z.object({ optedOut: z.array(z.string()) });

export const ChannelLookupRequest = z.object({ organizationId: z.string(), channelId: z.string() });
export const ChannelLookupResponse = z.object({ channel: ChannelUpserted.nullable() });

/** Envelope of every request/reply answer, so errors cross the bus typed. */
export const RpcError = z.object({ error: z.object({ code: z.string(), message: z.string(), retryable: z.boolean() }) });

export const RPC = {
  resolveContact: rpc("rpc.contacts.resolve.v1", ResolveContactRequest, ResolveContactResponse),
  checkOptOuts: rpc("rpc.contacts.optout.check.v1", OptOutCheckRequest, OptOutCheckResponse),
  lookupChannel: rpc("rpc.messaging.channel.lookup.v1", ChannelLookupRequest, ChannelLookupResponse),
} as const;
