import {
  AckPolicy,
  connect,
  createInbox,
  DeliverPolicy,
  headers as natsHeaders,
  nanos,
  RetentionPolicy,
  StorageType,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type Msg,
  type NatsConnection,
  type Subscription,
} from "nats";
import { gunzipSync, gzipSync } from "node:zlib";
import { z } from "zod";
import { RpcError, STREAMS, type RpcDef, type StreamDef, type SubjectDef } from "@platform/contracts";
import { currentRequestContext, withRequestContext, type Logger, type RequestContext } from "@platform/logging";
import { endSpan, extractTrace, injectTrace, natsSpan, SpanKind, type Context } from "@platform/telemetry";
import { BusUnavailableError, PermanentError, RetryableError, RpcCallError } from "./errors";

export interface BusOptions {
  url: string;
  /** Prefix of every subject and stream name (BUS_NAMESPACE); empty in production. */
  namespace?: string;
  /** Connection name, shown by the NATS server's monitoring. */
  name: string;
  log: Logger;
  /** Copies of every stream in a JetStream cluster (BUS_STREAM_REPLICAS): 1 on one server, 3 in production. */
  streamReplicas?: number;
}

export interface ConsumeOptions<S extends z.ZodType> {
  stream: StreamDef;
  durable: string;
  /** One filter subject per consumer (nats-server 2.9). */
  subject: SubjectDef<S> | { subject: string; schema: S };
  handler: (payload: z.infer<S>, ctx: MessageContext) => Promise<void>;
  /** Messages handled at once by this process. */
  concurrency?: number;
  ackWaitMs?: number;
  /** Deliveries before the message is dead-lettered. */
  maxDeliver?: number;
  /** Where a new durable starts: all retained messages (default) or only new ones. */
  deliverNew?: boolean;
  /**
   * Steps back when the process is busy (the bus's `setLoadGate`), so the requests the stack serves keep their
   * latency: true for the high-volume background consumers (an eighth of the concurrency in flight while busy);
   * "pause" for a consumer that starts a pipeline of work in several processes (provider batches): one in flight and
   * a pause of up to 100 ms before the next, so its backlog, and all the work downstream of it, waits in JetStream.
   * Copies of other services' facts (`sys.*`) leave it off.
   */
  yieldUnderLoad?: boolean | "pause";
}

/** What `consume` asks before starting another message (`LoadGate` of @platform/runtime). */
export interface ConsumerGate {
  readonly busy: boolean;
  /** Resolves when the process is calm again, or after `maxMs`. */
  calm(maxMs: number): Promise<void>;
}

/** Longest pause before a yielding consumer starts its next message anyway (it always makes progress). */
const MAX_YIELD_MS = 100;

export interface MessageContext {
  subject: string;
  deliveryCount: number;
  streamSequence: number;
  headers: Record<string, string>;
}

/** The header carrying the id of the HTTP request that caused a message (as `X-Request-Id` over HTTP). */
export const REQUEST_ID_HEADER = "X-Request-Id";

/** What a consumer did with one delivery. */
export type HandledOutcome = "ack" | "retry" | "dead_letter";

/** Hooks for metrics (packages/http's `instrumentBus`): called once per handled delivery. */
export interface BusObserver {
  handled(durable: string, outcome: HandledOutcome, deliveryCount: number, seconds: number): void;
}

/** A durable consumer's backlog, as the server counts it. */
export interface ConsumerState {
  durable: string;
  stream: string;
  /** Messages of the filter subject not yet delivered (the lag). */
  pending: number;
  /** Delivered, not yet acknowledged. */
  ackPending: number;
  /** Delivered more than once and not yet acknowledged. */
  redelivered: number;
}

/** One message of `publishBatch`. */
export interface PublishItem {
  subject: string;
  /** The JSON text, or a value to serialize. */
  payload: unknown;
  /** `Nats-Msg-Id`: a repeat inside the stream's duplicate window is dropped. */
  msgId?: string;
  headers?: Record<string, string>;
  trace?: Context;
}

/** JetStream's answer to a publish: `{stream, seq, duplicate?}` or `{error: {code, description}}`. */
type PubAck = { stream?: string; seq?: number; error?: { code?: number; description?: string } };

/** Publishes of `publishBatch` waiting for their acknowledgement, by reply token. */
type AckWaiter = { resolve: () => void; reject: (err: Error) => void };

/** The request id of the current request context, as a header set for a publish; undefined outside a request. */
function contextHeaders(): Record<string, string> | undefined {
  const requestId = currentRequestContext()?.requestId;
  return requestId ? { [REQUEST_ID_HEADER]: requestId } : undefined;
}

/** The request context a received message carries: its request id header, the payload's organization and its trace context. */
function contextOf(headers: Record<string, string>, payload: unknown, trace: Context | undefined): RequestContext {
  const org = (payload as { organizationId?: unknown } | null)?.organizationId;
  return {
    requestId: headers[REQUEST_ID_HEADER] || undefined,
    organizationId: typeof org === "string" ? org : undefined,
    trace,
  };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A JetStream payload within this many bytes of the server's `max_payload` (which counts the headers too) is stored
 * gzipped, with `Content-Encoding: gzip`: the gateway's 1 MB provider batches are JSON strings inside an envelope,
 * which escaping and headers push past NATS' default 1 MB. Smaller payloads (all but those) go as they are.
 */
export const COMPRESS_WITHIN_BYTES = 8 * 1024;
/** The most a stored gzipped payload may inflate to: well over any body the stack accepts (16 MB). */
const MAX_INFLATED_BYTES = 64 * 1024 * 1024;
const CONTENT_ENCODING = "Content-Encoding";

/** The payload bytes of a stored message as published: inflated when it was stored gzipped. */
export function payloadBytes(msg: Pick<Msg, "data" | "headers">): Uint8Array {
  return msg.headers?.get(CONTENT_ENCODING) === "gzip" ? gunzipSync(msg.data, { maxOutputLength: MAX_INFLATED_BYTES }) : msg.data;
}

/** What a dead letter carries: the payload as published, or as stored when its gzip itself cannot be read. */
export function deadLetterText(msg: Pick<Msg, "data" | "headers">): string {
  try {
    return decoder.decode(payloadBytes(msg));
  } catch {
    return decoder.decode(msg.data);
  }
}

/** Backoff of redeliveries after an unexpected failure: 1 s doubling to 60 s. */
export function redeliveryDelay(deliveryCount: number): number {
  return Math.min(60_000, 1_000 * 2 ** Math.max(0, deliveryCount - 1));
}

/**
 * The platform's bus: JetStream for what must not be lost, core NATS for
 * request/reply and broadcasts. Every subject and stream is namespaced.
 */
export class Bus {
  private consumers: ConsumerMessages[] = [];
  private subscriptions: Subscription[] = [];
  private inflight = new Set<Promise<void>>();
  private closing = false;
  private observer?: BusObserver;
  private readonly durables: Array<{ stream: string; durable: string }> = [];
  private gate?: ConsumerGate;
  /** Requests answered by `serve` now, and when the last one ended (the load gate's "serving"). */
  private rpcInFlight = 0;
  private rpcLastEnded = 0;
  /** `publishBatch`'s reply subscription (one wildcard inbox per connection) and the publishes awaiting their ack. */
  private pubAcks?: { prefix: string; sub: Subscription; waiting: Map<string, AckWaiter>; next: number };
  /** Acks of handlers that succeeded in this turn of the event loop, sent together (`ackSoon`). */
  private acks: JsMsg[] = [];
  private acksScheduled?: NodeJS.Immediate;

  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    private readonly namespace: string,
    private readonly log: Logger,
    private readonly streamReplicas = 1,
  ) {}

  static async connect(opts: BusOptions): Promise<Bus> {
    const nc = await connect({
      servers: opts.url.split(",").map((s) => s.trim()),
      name: opts.name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      timeout: 5_000,
      // An Error per request for async stack traces costs more than the request itself on the hot path.
      noAsyncTraces: true,
    });
    const jsm = await nc.jetstreamManager({ timeout: 5_000 });
    const bus = new Bus(nc, nc.jetstream({ timeout: 5_000 }), jsm, opts.namespace ?? "", opts.log, opts.streamReplicas ?? 1);
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect" || s.type === "reconnect") opts.log.warn({ status: s.type }, "nats connection status");
      }
    })().catch(() => undefined);
    return bus;
  }

  /** The namespaced form of a catalog subject. */
  subject(name: string): string {
    return this.namespace ? `${this.namespace}.${name}` : name;
  }

  streamName(def: StreamDef): string {
    return this.namespace ? `${this.namespace.toUpperCase()}_${def.name}` : def.name;
  }

  /** Creates the streams, or updates their settings; safe to call from every replica at start. */
  async ensureStreams(defs: StreamDef[] = Object.values(STREAMS)): Promise<void> {
    for (const def of defs) {
      const config = {
        name: this.streamName(def),
        subjects: def.subjects.map((s) => this.subject(s)),
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        duplicate_window: nanos(def.duplicateWindowMs),
        max_age: nanos(def.maxAgeMs),
        num_replicas: this.streamReplicas,
      };
      try {
        await this.jsm.streams.info(config.name);
        await this.jsm.streams.update(config.name, config);
      } catch (err) {
        if (!isNotFound(err)) throw err;
        try {
          await this.jsm.streams.add(config);
        } catch (addErr) {
          // Another replica created it between our info and add.
          if (!String((addErr as Error).message).includes("already in use")) throw addErr;
        }
      }
    }
  }

  /**
   * The busy signal of this process: while it is busy, consumers with `yieldUnderLoad` keep an eighth of their
   * concurrency in flight (at least one message), those with "pause" one with a pause between two.
   */
  setLoadGate(gate: ConsumerGate | undefined): void {
    this.gate = gate;
  }

  /** Whether this bus answers a request now or answered one in the last `withinMs`. */
  servingRequests(withinMs: number): boolean {
    return this.rpcInFlight > 0 || Date.now() - this.rpcLastEnded < withinMs;
  }

  /** Metrics hooks (one observer per bus). */
  setObserver(observer: BusObserver): void {
    this.observer = observer;
  }

  /**
   * For consumers that read JetStream themselves (analytics' batch consumer): counts
   * the durable in `consumerStates` and reports its handled deliveries to the observer.
   */
  trackDurable(stream: string, durable: string): void {
    if (!this.durables.some((d) => d.stream === stream && d.durable === durable)) this.durables.push({ stream, durable });
  }

  /** Reports one delivery a self-managed consumer handled (see `trackDurable`). */
  recordHandled(durable: string, outcome: HandledOutcome, deliveryCount: number, seconds: number): void {
    this.observer?.handled(durable, outcome, deliveryCount, seconds);
  }

  /** The backlog of every durable consumer this process runs (for the consumer lag metrics). */
  async consumerStates(): Promise<ConsumerState[]> {
    const states = await Promise.all(
      this.durables.map(async ({ stream, durable }) => {
        try {
          const info = await this.jsm.consumers.info(stream, durable);
          return { durable, stream, pending: info.num_pending, ackPending: info.num_ack_pending, redelivered: info.num_redelivered };
        } catch {
          return undefined;
        }
      }),
    );
    return states.filter((s): s is ConsumerState => s !== undefined);
  }

  /**
   * Publishes to JetStream; `msgId` makes a repeat inside the duplicate window a no-op.
   * Inside a request context the request id goes along as the `X-Request-Id` header.
   * The trace context (`trace`, else the current request's) goes along as
   * `traceparent`, under a producer span when tracing is on. A batch of one
   * (`publishBatch`): the acknowledgement comes back on the bus's shared inbox, not through
   * `js.publish`'s own request (the gateway publishes every provider batch this way).
   */
  async publish(subject: string, payload: unknown, opts: { msgId?: string; headers?: Record<string, string>; trace?: Context } = {}): Promise<void> {
    await this.publishBatch([{ subject, payload, msgId: opts.msgId, headers: opts.headers, trace: opts.trace }]);
  }

  /**
   * Publishes many messages to JetStream at once, each with its `msgId` (a repeat inside the duplicate window is a
   * no-op), in the given order on the connection; resolves when the stream has acknowledged every one, rejects when
   * one is refused or not acknowledged within the JetStream timeout (5 s; the caller publishes them all again: same
   * ids). Unlike `js.publish` (one core request each: its own reply muxing, timer and promise chain, and a NatsError
   * with a stack trace built at every successful answer in nats.js 2.29 `RequestOne.cancel`), the acknowledgements
   * come back on one wildcard inbox of this bus with one timer per batch. A refused publish rejects with the client's
   * error (its `code`, e.g. `MAX_PAYLOAD_EXCEEDED`) or the stream's answer. Headers and trace context as `publish`.
   */
  async publishBatch(items: PublishItem[]): Promise<void> {
    if (items.length === 0) return;
    const acks = this.ackInbox();
    const tokens: string[] = [];
    const spans: Array<ReturnType<typeof natsSpan>> = [];
    const done = items.map((item) => {
      const token = (acks.next++).toString(36);
      tokens.push(token);
      const t = natsSpan("publish", this.subject(item.subject), SpanKind.PRODUCER, item.trace ?? currentRequestContext()?.trace, item.msgId);
      spans.push(t);
      const hdrs = natsHeaders();
      if (item.msgId) hdrs.set("Nats-Msg-Id", item.msgId);
      const given = item.headers ?? contextHeaders();
      if (given) for (const k in given) hdrs.set(k, given[k]);
      injectTrace(t.context, (k, v) => hdrs.set(k, v));
      let data = typeof item.payload === "string" ? encoder.encode(item.payload) : encoder.encode(JSON.stringify(item.payload));
      if (data.length > (this.nc.info?.max_payload ?? Infinity) - COMPRESS_WITHIN_BYTES) {
        data = gzipSync(data);
        hdrs.set(CONTENT_ENCODING, "gzip");
      }
      const acked = new Promise<void>((resolve, reject) => acks.waiting.set(token, { resolve, reject }));
      try {
        this.nc.publish(this.subject(item.subject), data, { reply: `${acks.prefix}.${token}`, headers: hdrs });
      } catch (err) {
        // A closed connection refuses at once: the batch fails now, its waiters go.
        acks.waiting.get(token)?.reject(err as Error);
      }
      return acked;
    });
    const timer = setTimeout(() => {
      for (const token of tokens) acks.waiting.get(token)?.reject(new Error(`publish not acknowledged within ${PUBLISH_ACK_TIMEOUT_MS} ms`));
    }, PUBLISH_ACK_TIMEOUT_MS);
    const outcomes = await Promise.allSettled(done);
    clearTimeout(timer);
    for (const token of tokens) acks.waiting.delete(token);
    let failed: Error | undefined;
    outcomes.forEach((o, i) => {
      const err = o.status === "rejected" ? (o.reason as Error) : undefined;
      failed ??= err;
      endSpan(spans[i].span, err);
    });
    if (failed) throw failed;
  }

  /** The reply subscription of `publishBatch`, made at its first use. */
  private ackInbox(): NonNullable<Bus["pubAcks"]> {
    if (this.pubAcks) return this.pubAcks;
    const prefix = createInbox();
    const waiting = new Map<string, AckWaiter>();
    const sub = this.nc.subscribe(`${prefix}.*`, {
      callback: (err, msg) => {
        if (err) return;
        const waiter = waiting.get(msg.subject.slice(prefix.length + 1));
        if (!waiter) return;
        waiting.delete(msg.subject.slice(prefix.length + 1));
        const refused = pubAckError(msg);
        if (refused) waiter.reject(refused);
        else waiter.resolve();
      },
    });
    this.subscriptions.push(sub);
    this.pubAcks = { prefix, sub, waiting, next: 0 };
    return this.pubAcks;
  }

  /**
   * A durable, explicit-ack consumer. The handler's success acks; a
   * RetryableError (or any unexpected error) naks with backoff; a
   * PermanentError, an unparsable payload or exhausted deliveries
   * terminate the message and copy it to the dead-letter stream.
   */
  async consume<S extends z.ZodType>(opts: ConsumeOptions<S>): Promise<void> {
    const stream = this.streamName(opts.stream);
    const maxDeliver = opts.maxDeliver ?? 50;
    const config = {
      durable_name: opts.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: opts.deliverNew ? DeliverPolicy.New : DeliverPolicy.All,
      filter_subject: this.subject(opts.subject.subject),
      ack_wait: nanos(opts.ackWaitMs ?? 30_000),
      max_deliver: maxDeliver,
      max_ack_pending: Math.max(1_000, (opts.concurrency ?? 16) * 4),
    };
    try {
      await this.jsm.consumers.info(stream, opts.durable);
      await this.jsm.consumers.update(stream, opts.durable, {
        ack_wait: config.ack_wait,
        max_deliver: config.max_deliver,
        max_ack_pending: config.max_ack_pending,
        filter_subject: config.filter_subject,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await this.jsm.consumers.add(stream, config);
    }
    this.trackDurable(stream, opts.durable);
    const consumer = await this.js.consumers.get(stream, opts.durable);
    const messages = await consumer.consume({ max_messages: Math.max(64, (opts.concurrency ?? 16) * 2) });
    this.consumers.push(messages);
    const limit = opts.concurrency ?? 16;
    const running = new Set<Promise<void>>();
    const yieldUnderLoad = opts.yieldUnderLoad ?? false;
    void (async () => {
      for await (const msg of messages) {
        if (this.closing) break;
        const gate = yieldUnderLoad ? this.gate : undefined;
        if (gate?.busy) {
          // Busy: an eighth of the concurrency in flight (at least one), or one for "pause"; the next one starts when
          // one ends or the process is calm again (checked at least every 100 ms, so it always moves on).
          const cap = yieldUnderLoad === "pause" ? 1 : Math.max(1, Math.floor(limit / 8));
          while (running.size >= cap && gate.busy) await Promise.race([Promise.race(running), gate.calm(MAX_YIELD_MS)]);
          // "pause": a break between two messages too, however short each is (at least ~10 per second still start).
          if (yieldUnderLoad === "pause" && gate.busy) await gate.calm(MAX_YIELD_MS);
        }
        const task = this.handle(msg, opts, maxDeliver).finally(() => {
          running.delete(task);
          this.inflight.delete(task);
        });
        running.add(task);
        this.inflight.add(task);
        if (running.size >= limit) await Promise.race(running);
      }
    })().catch((err) => this.log.error({ durable: opts.durable, err: (err as Error).message }, "consumer loop ended"));
  }

  private async handle<S extends z.ZodType>(msg: JsMsg, opts: ConsumeOptions<S>, maxDeliver: number): Promise<void> {
    const deliveryCount = msg.info.deliveryCount;
    let payload: z.infer<S>;
    try {
      payload = opts.subject.schema.parse(JSON.parse(decoder.decode(payloadBytes(msg))));
    } catch (err) {
      await this.deadLetter(msg, opts.durable, `unparsable payload: ${(err as Error).message}`);
      return;
    }
    const hdrs: Record<string, string> = {};
    if (msg.headers) for (const [k, v] of msg.headers) hdrs[k] = v[0] ?? "";
    // Keep the message ours while a slow handler runs.
    const keepAlive = setInterval(() => msg.working(), Math.max(1_000, (opts.ackWaitMs ?? 30_000) / 3));
    const t = natsSpan("process", msg.subject, SpanKind.CONSUMER, extractTrace((name) => hdrs[name]));
    const ctx = contextOf(hdrs, payload, t.context);
    const debug = this.log.isLevelEnabled("debug");
    const started = this.observer || debug ? process.hrtime.bigint() : 0n;
    const observe = (outcome: HandledOutcome) => {
      if (t.span) {
        t.span.setAttribute("messaging.nats.outcome", outcome);
        endSpan(t.span, outcome === "ack" ? undefined : outcome);
      }
      if (!this.observer && !debug) return;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.observer?.handled(opts.durable, outcome, deliveryCount, seconds);
      // One line per handled delivery at debug level, in the message's request context.
      if (debug) withRequestContext(ctx, () => this.log.debug({ durable: opts.durable, subject: msg.subject, deliveryCount, outcome, ms: seconds * 1000 }, "message handled"));
    };
    try {
      await withRequestContext(ctx, () =>
        opts.handler(payload, { subject: msg.subject, deliveryCount, streamSequence: msg.seq, headers: hdrs }),
      );
      this.ackSoon(msg);
      observe("ack");
    } catch (err) {
      if (err instanceof PermanentError || err instanceof z.ZodError) {
        observe("dead_letter");
        await withRequestContext(ctx, () => this.deadLetter(msg, opts.durable, (err as Error).message));
      } else if (deliveryCount >= maxDeliver) {
        observe("dead_letter");
        await withRequestContext(ctx, () => this.deadLetter(msg, opts.durable, `gave up after ${deliveryCount} deliveries: ${(err as Error).message}`));
      } else {
        observe("retry");
        const delay = err instanceof RetryableError && err.delayMs !== undefined ? err.delayMs : redeliveryDelay(deliveryCount);
        if (!(err instanceof RetryableError)) {
          withRequestContext(ctx, () =>
            this.log.warn({ durable: opts.durable, subject: msg.subject, deliveryCount, err: (err as Error).message }, "handler failed, will retry"),
          );
        }
        msg.nak(delay);
      }
    } finally {
      clearInterval(keepAlive);
    }
  }

  /**
   * Acks at the end of this turn of the event loop, with every other ack of the turn. The client writes to its
   * socket once per microtask checkpoint, and each handler ends in its own, so acking at once meant one socket write
   * per message: a third of a busy consumer's CPU went to those writes (the inbound bench's profiles). Only what
   * succeeded is acked, as before, and a little later; a crash in between redelivers it (handlers are idempotent).
   */
  private ackSoon(msg: JsMsg): void {
    this.acks.push(msg);
    this.acksScheduled ??= setImmediate(() => this.flushAcks());
  }

  private flushAcks(): void {
    if (this.acksScheduled) clearImmediate(this.acksScheduled);
    this.acksScheduled = undefined;
    const acks = this.acks;
    this.acks = [];
    for (const msg of acks) msg.ack();
  }

  private async deadLetter(msg: JsMsg, durable: string, reason: string): Promise<void> {
    this.log.error({ durable, subject: msg.subject, seq: msg.seq, reason }, "message dead-lettered");
    try {
      await this.publish(`dlq.${durable}`, deadLetterText(msg), {
        msgId: `dlq:${durable}:${msg.info.streamSequence}`,
        headers: {
          ...contextHeaders(),
          "X-Original-Subject": msg.subject,
          "X-Dead-Letter-Reason": reason.replace(/[\r\n]+/g, " ").slice(0, 500),
        },
      });
      msg.term();
    } catch (err) {
      // Not copied: leave it for redelivery rather than lose it.
      msg.nak(5_000);
      this.log.error({ durable, err: (err as Error).message }, "dead-letter publish failed");
    }
  }

  /** Asks a question over core request/reply; answers are validated; errors come back typed. */
  async request<Req extends z.ZodType, Res extends z.ZodType>(
    def: RpcDef<Req, Res>,
    payload: z.input<Req>,
    opts: { timeoutMs?: number } = {},
  ): Promise<z.infer<Res>> {
    let reply;
    const t = natsSpan("request", this.subject(def.subject), SpanKind.CLIENT, currentRequestContext()?.trace);
    try {
      let hdrs: ReturnType<typeof natsHeaders> | undefined;
      const set = (k: string, v: string) => (hdrs ??= natsHeaders()).set(k, v);
      const given = contextHeaders();
      if (given) for (const k in given) set(k, given[k]);
      injectTrace(t.context, set);
      reply = await this.nc.request(this.subject(def.subject), encoder.encode(JSON.stringify(payload)), { timeout: opts.timeoutMs ?? 3_000, headers: hdrs });
    } catch (err) {
      endSpan(t.span, err);
      throw new BusUnavailableError(`${def.subject}: ${(err as Error).message}`);
    }
    endSpan(t.span);
    const body = JSON.parse(decoder.decode(reply.data)) as unknown;
    const failed = RpcError.safeParse(body);
    if (failed.success) throw new RpcCallError(failed.data.error.code, failed.data.error.message, failed.data.error.retryable);
    return def.response.parse(body);
  }

  /**
   * Answers a request/reply subject, load-balanced over a queue group. A thrown
   * error goes back as `{error: {code, message, retryable}}`.
   */
  serve<Req extends z.ZodType, Res extends z.ZodType>(
    def: RpcDef<Req, Res>,
    handler: (request: z.infer<Req>) => Promise<z.input<Res>>,
    queue = "workers",
  ): void {
    const sub = this.nc.subscribe(this.subject(def.subject), { queue });
    this.subscriptions.push(sub);
    void (async () => {
      for await (const msg of sub) {
        const t = natsSpan("process", msg.subject, SpanKind.SERVER, msg.headers ? extractTrace((name) => msg.headers?.get(name) || undefined) : undefined);
        const ctx: RequestContext = msg.headers ? { requestId: msg.headers.get(REQUEST_ID_HEADER) || undefined, trace: t.context } : { trace: t.context };
        const task = withRequestContext(ctx, async () => {
          let answer: unknown;
          try {
            const request = def.request.parse(JSON.parse(decoder.decode(msg.data)));
            const org = (request as { organizationId?: unknown } | null)?.organizationId;
            if (typeof org === "string") ctx.organizationId = org;
            answer = await handler(request);
          } catch (err) {
            const e = err as { code?: unknown; message?: string };
            const invalid = err instanceof z.ZodError || err instanceof SyntaxError;
            if (!invalid && !(err instanceof RpcCallError) && typeof e.code !== "string") {
              this.log.error({ subject: def.subject, err: e.message }, "request handler failed");
            }
            answer = {
              error: {
                code: invalid ? "VALIDATION_ERROR" : typeof e.code === "string" ? e.code : "INTERNAL_ERROR",
                message: invalid ? "invalid request" : (e.message ?? "failed"),
                retryable: err instanceof RpcCallError ? err.retryable : !invalid && !(err instanceof PermanentError),
              },
            };
          }
          msg.respond(encoder.encode(JSON.stringify(answer)));
          endSpan(t.span, (answer as { error?: { code?: string } })?.error?.code);
          if (this.log.isLevelEnabled("debug")) this.log.debug({ subject: def.subject, failed: (answer as { error?: unknown })?.error !== undefined }, "request answered");
        });
        this.inflight.add(task);
        this.rpcInFlight++;
        void task.finally(() => {
          this.inflight.delete(task);
          this.rpcInFlight--;
          this.rpcLastEnded = Date.now();
        });
      }
    })();
  }

  /** Fire-and-forget to every subscriber (core NATS): cache evictions, gossip. */
  broadcast<S extends z.ZodType>(def: SubjectDef<S>, payload: z.input<S>): void {
    this.nc.publish(this.subject(def.subject), encoder.encode(JSON.stringify(payload)));
  }

  /** Every replica receives every broadcast (no queue group). */
  onBroadcast<S extends z.ZodType>(def: SubjectDef<S>, handler: (payload: z.infer<S>) => void): void {
    const sub = this.nc.subscribe(this.subject(def.subject), {
      callback: (err, msg) => {
        if (err) return;
        try {
          handler(def.schema.parse(JSON.parse(decoder.decode(msg.data))));
        } catch (e) {
          this.log.warn({ subject: def.subject, err: (e as Error).message }, "bad broadcast ignored");
        }
      },
    });
    this.subscriptions.push(sub);
  }

  /** Status changes of the connection (reconnects), e.g. to drop caches that may have missed broadcasts. */
  onReconnect(handler: () => void): void {
    void (async () => {
      for await (const s of this.nc.status()) if (s.type === "reconnect") handler();
    })().catch(() => undefined);
  }

  async ping(): Promise<void> {
    if (this.nc.isClosed()) throw new Error("nats connection closed");
    await this.nc.flush();
    await this.jsm.getAccountInfo();
  }

  /** Stops taking new messages, lets the ones in hand finish, then drains the connection. */
  async close(): Promise<void> {
    this.closing = true;
    for (const c of this.consumers) await c.close().catch(() => undefined);
    for (const s of this.subscriptions) s.unsubscribe();
    await Promise.allSettled([...this.inflight]);
    this.flushAcks();
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => undefined);
  }
}

/** How long `publishBatch` waits for the stream's acknowledgements (as the JetStream client's timeout). */
const PUBLISH_ACK_TIMEOUT_MS = 5_000;

/** Why JetStream refused a publish (a status such as 503 "no responders": no stream has the subject; or an API error), or undefined for an ack. */
export function pubAckError(msg: Pick<Msg, "data" | "headers">): Error | undefined {
  const code = msg.headers?.code ?? 0;
  if (code >= 300) return new Error(`publish refused: ${code} ${msg.headers?.description ?? ""}`.trim());
  let ack: PubAck;
  try {
    ack = JSON.parse(decoder.decode(msg.data)) as PubAck;
  } catch {
    return new Error("publish answered with an invalid ack");
  }
  if (ack.error) return new Error(`publish refused: ${ack.error.code ?? ""} ${ack.error.description ?? ""}`.trim());
  if (!ack.stream) return new Error("publish answered with an invalid ack");
  return undefined;
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: string; api_error?: { code?: number }; message?: string };
  return e?.api_error?.code === 404 || e?.code === "404" || /not found/i.test(e?.message ?? "");
}
