import { Batcher } from "@platform/runtime";
import { messagesRepository, type MessageRow, type OutboundInput, type SentMarkInput } from "../db/repositories/messages.repository";
import type { Queryable } from "../db/repositories/queryable";
import { conversationEvent } from "./events";

type Write = { kind: "store"; input: OutboundInput } | { kind: "sent"; mark: SentMarkInput };
type Stored = { message: MessageRow; paceWaitMs: number };

/**
 * The send path's writes, coalesced (`Batcher`): new messages to store (with
 * their pacing slots) and accepted attempts to mark `sent`, from every
 * concurrent request, go to Postgres together in one statement and one
 * commit per batch (`messagesRepository.writeSendBatch`).
 */
export class SendWrites {
  private readonly batcher: Batcher<Write, Stored | boolean>;

  constructor(db: Queryable) {
    this.batcher = new Batcher(async (_key, writes) => {
      const inputs: OutboundInput[] = [];
      const marks: SentMarkInput[] = [];
      for (const w of writes) {
        if (w.kind === "store") inputs.push(w.input);
        else marks.push(w.mark);
      }
      const { stored, sentIds } = await messagesRepository.writeSendBatch(db, inputs, marks, (c) => conversationEvent(c, "conversation.opened"));
      let k = 0;
      return writes.map((w) => (w.kind === "store" ? stored[k++] : sentIds.has(w.mark.id)));
    }, 200);
  }

  /** Stores a new outbound text (`pending`, leased) and reserves its pacing slot; answers the row and how long to wait for the slot. */
  store(input: OutboundInput): Promise<Stored> {
    return this.batcher.submit("send", { kind: "store", input }) as Promise<Stored>;
  }

  /** Marks an accepted attempt `sent` with its event; false when the attempt no longer owns the message. */
  markSent(mark: SentMarkInput): Promise<boolean> {
    return this.batcher.submit("send", { kind: "sent", mark }) as Promise<boolean>;
  }

  /** Statements run so far (for tests). */
  get batches(): number {
    return this.batcher.batches;
  }
}
