import { AckPolicy, DeliverPolicy, nanos, type ConsumerMessages, type JsMsg } from "nats";
import { deadLetterText, payloadBytes, redeliveryDelay, type Bus } from "@platform/bus";
import { DomainEvent, MessageStatusData, STREAMS, type StreamDef } from "@platform/contracts";
import type { Logger } from "@platform/logging";
import type { DataSource, EntityManager } from "typeorm";
import { applyStatusEvents, type StatusEvent } from "../../use-cases/apply-statuses";

/** The durable of the message events; one filter subject per consumer (nats-server 2.9), message.received is skipped. */
export const MESSAGE_EVENTS_DURABLE = "analytics-message-events";
export const MESSAGE_EVENTS_FILTER = "evt.message.>";

const STATUS_EVENTS = new Set(["message.sent", "message.delivered", "message.read", "message.failed"]);
const decoder = new TextDecoder();

/** One message as a feed hands it over, "skip" for what the feed carries but analytics ignores, or why it is unusable. */
export type Parsed = { event: StatusEvent; timestamp: number } | "skip" | string;

/** Where the ingestor reads message statuses from: a durable consumer of one stream, with one filter subject. */
export interface MessageFeed {
  durable: string;
  stream: StreamDef;
  filter: string;
  parse(m: JsMsg): Parsed;
}

/** The public status events (`message.sent`, `.delivered`, `.read`, `.failed`). */
export const STATUS_EVENTS_FEED: MessageFeed = {
  durable: MESSAGE_EVENTS_DURABLE,
  stream: STREAMS.events,
  filter: MESSAGE_EVENTS_FILTER,
  parse: parseStatusEvent,
};

export interface IngestorOptions {
  db: DataSource;
  bus: Bus;
  log: Logger;
  batchMax: number;
  maxAckPending: number;
  ackWaitMs: number;
  /** Default: the status events. */
  feed?: MessageFeed;
  /** Default: the feed's (tests use their own). */
  durable?: string;
  /** Test seams around the commit of a batch (a crash between apply and commit, or between commit and ack). */
  hooks?: {
    beforeCommit?: (tx: EntityManager, batchNo: number) => Promise<void>;
    afterCommit?: (batchNo: number) => Promise<void>;
  };
}

export interface IngestStats {
  batches: number;
  events: number;
  changed: number;
  /** Event timestamp → commit, in ms, of the last batch's oldest event. */
  lastLagMs: number;
}

/**
 * Pull consumer of a feed of message statuses applied in batches: whatever arrived
 * while the previous batch was committing (up to `batchMax`) is applied in ONE
 * transaction, then acked. A consumer killed before the ack gets the batch
 * again after the ack wait; the per-message rows make that a no-op.
 */
export class MessageEventIngestor {
  private messages?: ConsumerMessages;
  private buffer: JsMsg[] = [];
  private wake?: () => void;
  private stopped = false;
  private loop?: Promise<void>;
  readonly stats: IngestStats = { batches: 0, events: 0, changed: 0, lastLagMs: 0 };

  private readonly feed: MessageFeed;

  constructor(private readonly opts: IngestorOptions) {
    this.feed = opts.feed ?? STATUS_EVENTS_FEED;
  }

  get durable(): string {
    return this.opts.durable ?? this.feed.durable;
  }

  async start(): Promise<void> {
    const { bus } = this.opts;
    const stream = bus.streamName(this.feed.stream);
    const settings = {
      ack_wait: nanos(this.opts.ackWaitMs),
      max_ack_pending: this.opts.maxAckPending,
      max_deliver: -1,
      filter_subject: bus.subject(this.feed.filter),
    };
    try {
      await bus.jsm.consumers.info(stream, this.durable);
      await bus.jsm.consumers.update(stream, this.durable, settings);
    } catch (err) {
      if (!/not found/i.test((err as Error).message ?? "") && (err as { code?: string }).code !== "404") throw err;
      await bus.jsm.consumers.add(stream, { durable_name: this.durable, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ...settings });
    }
    bus.trackDurable(stream, this.durable);
    const consumer = await bus.js.consumers.get(stream, this.durable);
    const messages = await consumer.consume({ max_messages: Math.min(this.opts.maxAckPending, this.opts.batchMax * 2) });
    this.messages = messages;
    void (async () => {
      for await (const m of messages) {
        this.buffer.push(m);
        this.wake?.();
      }
    })()
      .catch((err) => this.opts.log.error({ err: (err as Error).message }, "analytics consumer stream ended"))
      .finally(() => {
        this.stopped = true;
        this.wake?.();
      });
    this.loop = this.run();
  }

  /** Stops taking messages; the batch in hand is committed and acked first. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.messages?.close().catch(() => undefined);
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.buffer.length === 0) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      const batch = this.buffer.splice(0, this.opts.batchMax);
      await this.applyBatch(batch);
    }
  }

  private async applyBatch(batch: JsMsg[]): Promise<void> {
    const events: StatusEvent[] = [];
    const take: JsMsg[] = [];
    let oldest = Number.POSITIVE_INFINITY;
    for (const m of batch) {
      const parsed = this.feed.parse(m);
      if (parsed === "skip") {
        take.push(m);
      } else if (typeof parsed === "string") {
        await this.deadLetter(m, parsed);
      } else {
        events.push(parsed.event);
        oldest = Math.min(oldest, parsed.timestamp);
        take.push(m);
      }
    }
    const batchNo = this.stats.batches + 1;
    const started = performance.now();
    const record = (outcome: "ack" | "retry") => {
      const seconds = (performance.now() - started) / 1000;
      for (const m of take) this.opts.bus.recordHandled(this.durable, outcome, m.info.deliveryCount, seconds);
    };
    try {
      const changed = await this.opts.db.transaction(async (tx) => {
        const n = await applyStatusEvents(tx, events);
        await this.opts.hooks?.beforeCommit?.(tx, batchNo);
        return n;
      });
      await this.opts.hooks?.afterCommit?.(batchNo);
      for (const m of take) m.ack();
      record("ack");
      this.stats.batches = batchNo;
      this.stats.events += events.length;
      this.stats.changed += changed;
      if (Number.isFinite(oldest)) this.stats.lastLagMs = Date.now() - oldest;
    } catch (err) {
      this.opts.log.warn({ err: (err as Error).message, size: take.length }, "analytics batch failed, will be redelivered");
      record("retry");
      for (const m of take) {
        try {
          m.nak(redeliveryDelay(m.info.deliveryCount));
        } catch {
          // Connection gone: the ack wait brings it back.
        }
      }
    }
  }

  private async deadLetter(m: JsMsg, reason: string): Promise<void> {
    this.opts.log.error({ subject: m.subject, seq: m.seq, reason }, "message event dead-lettered");
    try {
      await this.opts.bus.publish(`dlq.${this.durable}`, deadLetterText(m), {
        msgId: `dlq:${this.durable}:${m.info.streamSequence}`,
        headers: { "X-Original-Subject": m.subject, "X-Dead-Letter-Reason": reason.replace(/[\r\n]+/g, " ").slice(0, 500) },
      });
      m.term();
      this.opts.bus.recordHandled(this.durable, "dead_letter", m.info.deliveryCount, 0);
    } catch {
      m.nak(5_000);
    }
  }
}

/** A message's JSON payload, or why it is not JSON. */
export function payloadOf(m: JsMsg): { value: unknown } | string {
  try {
    return { value: JSON.parse(decoder.decode(payloadBytes(m))) };
  } catch (err) {
    return `unparsable payload: ${(err as Error).message}`;
  }
}

/** A status event, "skip" for the other message events (message.received), or why it cannot be used. */
function parseStatusEvent(m: JsMsg): Parsed {
  const raw = payloadOf(m);
  if (typeof raw === "string") return raw;
  const env = DomainEvent.safeParse(raw.value);
  if (!env.success) return `envelope: ${env.error.message}`;
  if (!STATUS_EVENTS.has(env.data.event)) return "skip";
  const data = MessageStatusData.safeParse(env.data.data);
  if (!data.success) return `${env.data.event} data: ${data.error.message}`;
  if (Number.isNaN(Date.parse(data.data.createdAt))) return `${env.data.event} data: createdAt is not a date`;
  const status = env.data.event.slice("message.".length) as StatusEvent["status"];
  return {
    event: { organizationId: env.data.organizationId, messageId: data.data.messageId, createdAt: data.data.createdAt, status },
    timestamp: Date.parse(env.data.timestamp),
  };
}
