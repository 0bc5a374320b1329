import { outboxOrigin } from "@platform/bus";
import { sqlState } from "@platform/db";
import { Batcher } from "@platform/runtime";
import { messagesRepository, sendRounds, type MessageRow, type OutboundInput, type SentMarkInput } from "../db/repositories/messages.repository";
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
 * commit per batch (`messagesRepository.writeSendStatement`; a repeated
 * contact goes in a following statement). A failed statement fails only its
 * own messages.
 */
export class SendWrites {
  private readonly batcher: Batcher<Write, Stored | boolean | Failed>;

  constructor(db: Queryable) {
    /** One statement; a deadlock (with an inbound batch touching the same conversations) rolled it back whole, so it runs again. */
    const statement = async (inputs: OutboundInput[], marks: SentMarkInput[]) => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await messagesRepository.writeSendStatement(db, inputs, marks, (c) => conversationEvent(c, "conversation.opened"));
        } catch (err) {
          if (sqlState(err) !== DEADLOCK_DETECTED || attempt >= 3) throw err;
        }
      }
    };
    this.batcher = new Batcher(async (_key, writes) => {
      const marks = writes.flatMap((w) => (w.kind === "sent" ? [w.mark] : []));
      const rounds = sendRounds(writes.flatMap((w) => (w.kind === "store" ? [w.input] : [])));
      const stored = new Map<string, Stored | Failed>();
      let sentIds: Set<string> | Failed = new Set();
      // The marks ride with the first round (or alone when nothing is new).
      for (const [r, round] of (rounds.length > 0 ? rounds : [[]]).entries()) {
        const roundMarks = r === 0 ? marks : [];
        if (round.length === 0 && roundMarks.length === 0) continue;
        try {
          const result = await statement(round, roundMarks);
          round.forEach((m, i) => stored.set(m.id, result.stored[i]));
          if (roundMarks.length > 0) sentIds = result.sentIds;
        } catch (err) {
          if (round.length === 0 || roundMarks.length === 0) {
            for (const m of round) stored.set(m.id, new Failed(err));
            if (roundMarks.length > 0) sentIds = new Failed(err);
            continue;
          }
          // The statement changed nothing: each part again on its own, so that a problem with one new
          // message never costs an attempt the provider accepted its `sent` mark (nor the reverse).
          const [s, m] = await Promise.allSettled([statement(round, []), statement([], roundMarks)]);
          round.forEach((msg, i) => stored.set(msg.id, s.status === "fulfilled" ? s.value.stored[i] : new Failed(s.reason)));
          sentIds = m.status === "fulfilled" ? m.value.sentIds : new Failed(m.reason);
        }
      }
      return writes.map((w) => {
        if (w.kind === "store") return stored.get(w.input.id) ?? new Failed(new Error(`message ${w.input.id} was not written`));
        return sentIds instanceof Failed ? sentIds : sentIds.has(w.mark.id);
      });
    }, 200);
  }

  /** Stores a new outbound text (`pending`, leased) and reserves its pacing slot; answers the row and how long to wait for the slot. */
  async store(input: OutboundInput): Promise<Stored> {
    // The batch's statement runs in the first caller's context: each input keeps its own request's origin.
    return Failed.unwrap(await this.batcher.submit("send", { kind: "store", input: input.origin ? input : { ...input, origin: outboxOrigin() } })) as Stored;
  }

  /**
   * Marks an accepted attempt `sent` with its event; false when the attempt no longer owns the message.
   * Template sends use their own lane (`bulk`): their marks, hundreds per second during a job, go in their own
   * statements, so a single send's store or mark never waits behind a statement full of a job's marks.
   */
  async markSent(mark: SentMarkInput, lane: "send" | "bulk" = "send"): Promise<boolean> {
    return Failed.unwrap(await this.batcher.submit(lane, { kind: "sent", mark })) as boolean;
  }
}
