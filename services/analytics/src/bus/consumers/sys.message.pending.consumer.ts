import type { JsMsg } from "nats";
import { MESSAGING_SUBJECTS, MessagePending, STREAMS } from "@platform/contracts";
import { payloadOf, type MessageFeed, type Parsed } from "./evt.message.status.consumer";

/** The durable of messaging's `sys.message.pending.v1` facts. */
export const PENDING_MESSAGES_DURABLE = "analytics-pending-messages";

/**
 * Outbound messages their first provider attempt left pending (stored, answered with `providerMessageId: null`,
 * retried in the background): counted as `pending` from then on, until their first status event moves them on. A
 * pending fact that comes after that status changes nothing (pending ranks lowest).
 */
export const PENDING_MESSAGES_FEED: MessageFeed = {
  durable: PENDING_MESSAGES_DURABLE,
  stream: STREAMS.system,
  filter: MESSAGING_SUBJECTS.messagePending.subject,
  parse: parsePending,
};

function parsePending(m: JsMsg): Parsed {
  const raw = payloadOf(m);
  if (typeof raw === "string") return raw;
  const fact = MessagePending.safeParse(raw.value);
  if (!fact.success) return `message.pending: ${fact.error.message}`;
  if (Number.isNaN(Date.parse(fact.data.createdAt))) return "message.pending: createdAt is not a date";
  const { organizationId, messageId, createdAt } = fact.data;
  return { event: { organizationId, messageId, createdAt, status: "pending" }, timestamp: m.info.timestampNanos / 1e6 };
}
