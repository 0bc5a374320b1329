import { STREAMS } from "@platform/contracts";
import type { Bus } from "@platform/bus";

/** The durable of the status callbacks (`provider.inbound.v1`); see consumers/provider.inbound.consumer.ts. */
export const STATUS_CALLBACKS_DURABLE = "messaging-provider-inbound";

/** How long the watermark may stay unknown (NATS unreachable) before sends stop waiting for it. */
const UNKNOWN_FOR_MS = 60_000;

/**
 * How far the provider's status callbacks have been applied: a time before which every callback the gateway stored
 * has been processed by the status consumer (any replica: the durable is shared).
 *
 * A send whose provider call went unanswered, or whose sender died during the call (its lease ran out), may have been
 * accepted by the provider; its status callback, which carries our message id, settles it. The retry waits
 * `PROVIDER_UNANSWERED_RETRY_MS` for that callback, but a callback stored while messaging was down, or behind a
 * backlog, is applied later than that: a retry then sent the message a second time (a fault run with messaging down
 * for a minute: 197 messages sent twice). So such a retry also waits until the callbacks stored up to its due time
 * have been applied (`appliedThrough`).
 *
 * Read from the consumer's state every `intervalMs`: with nothing pending and nothing unacknowledged, everything stored
 * until the read is applied; with nothing pending, everything stored until the read is applied once the ack floor
 * passes the last delivered message. While NATS does not answer for a minute the watermark is taken as passed (the
 * retry then only waits its time, as before).
 */
export class CallbackWatermark {
  private through = 0;
  private readonly marks: Array<{ at: number; seq: number }> = [];
  private lastRead = Date.now();
  private timer?: NodeJS.Timeout;
  private reading = false;

  constructor(
    private readonly bus: Pick<Bus, "jsm" | "streamName">,
    private readonly intervalMs = 500,
  ) {}

  start(): () => void {
    this.timer = setInterval(() => void this.read(), this.intervalMs);
    this.timer.unref();
    void this.read();
    return () => clearInterval(this.timer);
  }

  /** Whether every callback stored before `at` (epoch ms) has been applied. */
  appliedThrough(at: number): boolean {
    if (Date.now() - this.lastRead > UNKNOWN_FOR_MS) return true;
    return this.through >= at;
  }

  async read(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    const at = Date.now();
    try {
      const info = await this.bus.jsm.consumers.info(this.bus.streamName(STREAMS.provider), STATUS_CALLBACKS_DURABLE);
      this.lastRead = Date.now();
      if (info.num_pending === 0 && info.num_ack_pending === 0) {
        this.through = Math.max(this.through, at);
        this.marks.length = 0;
        return;
      }
      if (info.num_pending === 0) this.marks.push({ at, seq: info.delivered.stream_seq });
      while (this.marks.length > 0 && this.marks[0]!.seq <= info.ack_floor.stream_seq) this.through = Math.max(this.through, this.marks.shift()!.at);
      if (this.marks.length > 1_000) this.marks.splice(0, this.marks.length - 1_000);
    } catch {
      // Unknown for now (NATS restarting, the consumer not created yet): the watermark stays where it was.
    } finally {
      this.reading = false;
    }
  }
}
