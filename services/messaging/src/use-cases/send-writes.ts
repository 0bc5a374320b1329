import { sqlState } from "@platform/db";
import { Batcher } from "@platform/runtime";
import { messagesRepository, type MessageRow, type OutboundInput, type SentMarkInput } from "../db/repositories/messages.repository";
import type { Queryable } from "../db/repositories/queryable";
import { conversationEvent } from "./events";

const DEADLOCK_DETECTED = "40P01";

type Write = { kind: "store"; input: OutboundInput } | { kind: "sent"; mark: SentMarkInput };
type Stored = { message: MessageRow; paceWaitMs: number };

/** One part of a batch failed while the other succeeded: its callers get the error. */
class Failed {
  constructor(readonly error: unknown) {}
  static unwrap<T>(value: T | Failed): T {
    if (value instanceof Failed) throw value.error;
    return value;
  }
}

/**
 * The send path's writes, coalesced (`Batcher`): new messages to store (with
 * their pacing slots) and accepted attempts to mark `sent`, from every
 * concurrent request, go to Postgres together in one statement and one
 * commit per batch (`messagesRepository.writeSendBatch`).
 */
export class SendWrites {
  private readonly batcher: Batcher<Write, Stored | boolean | Failed>;

  constructor(db: Queryable) {
    const write = async (inputs: OutboundInput[], marks: SentMarkInput[]) => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await messagesRepository.writeSendBatch(db, inputs, marks, (c) => conversationEvent(c, "conversation.opened"));
        } catch (err) {
          // A deadlock with another transaction (an inbound batch touching the same conversations in
          // another order) rolled the whole statement back: run it again.
          if (sqlState(err) !== DEADLOCK_DETECTED || attempt >= 3) throw err;
        }
      }
    };
    this.batcher = new Batcher(async (_key, writes) => {
      const inputs: OutboundInput[] = [];
      const marks: SentMarkInput[] = [];
      for (const w of writes) {
        if (w.kind === "store") inputs.push(w.input);
        else marks.push(w.mark);
      }
      let stored: Stored[] | Failed;
      let sentIds: Set<string> | Failed;
      try {
        ({ stored, sentIds } = await write(inputs, marks));
      } catch (err) {
        if (inputs.length === 0 || marks.length === 0) throw err;
        // The statement failed as a whole (and changed nothing): each part again on its own, so that a
        // problem with one new message never costs an attempt the provider accepted its `sent` mark.
        const [s, m] = await Promise.allSettled([write(inputs, []), write([], marks)]);
        stored = s.status === "fulfilled" ? s.value.stored : new Failed(s.reason);
        sentIds = m.status === "fulfilled" ? m.value.sentIds : new Failed(m.reason);
      }
      let k = 0;
      return writes.map((w) => {
        if (w.kind === "store") return stored instanceof Failed ? stored : stored[k++];
        return sentIds instanceof Failed ? sentIds : sentIds.has(w.mark.id);
      });
    }, 200);
  }

  /** Stores a new outbound text (`pending`, leased) and reserves its pacing slot; answers the row and how long to wait for the slot. */
  async store(input: OutboundInput): Promise<Stored> {
    return Failed.unwrap(await this.batcher.submit("send", { kind: "store", input })) as Stored;
  }

  /** Marks an accepted attempt `sent` with its event; false when the attempt no longer owns the message. */
  async markSent(mark: SentMarkInput): Promise<boolean> {
    return Failed.unwrap(await this.batcher.submit("send", { kind: "sent", mark })) as boolean;
  }

  /** Statements run so far (for tests). */
  get batches(): number {
    return this.batcher.batches;
  }
}
