import type { JsMsg } from "nats";
import { MESSAGING_SUBJECTS, MessagePending, STREAMS } from "@platform/contracts";
import type { AnalyticsStatus } from "../../use-cases/apply-statuses";
import { payloadOf, type MessageFeed, type Parsed } from "./evt.message.status.consumer";

/** The durable of messaging's `sys.message.pending.v1` facts. */
export const PENDING_MESSAGES_DURABLE = "analytics-pending-messages";
/** The durable of messaging's `sys.message.cancelled.v1` facts (one filter subject per consumer, nats-server 2.9). */
export const CANCELLED_MESSAGES_DURABLE = "analytics-cancelled-messages";

/**
 * Outbound messages their first provider attempt left pending (stored, answered with `providerMessageId: null`,
 * retried in the background): counted as `pending` from then on, until their first status event moves them on. A
 * pending fact that comes after that status changes nothing (pending ranks lowest).
 */
export const PENDING_MESSAGES_FEED: MessageFeed = {
  durable: PENDING_MESSAGES_DURABLE,
  stream: STREAMS.system,
  filter: MESSAGING_SUBJECTS.messagePending.subject,
  parse: (m) => parseFact(m, "pending"),
};

/**
 * Template sends their job's cancel ended before they reached the provider (no public event: ADR 0018): counted as
 * `cancelled`, a final status, whatever came before (`pending`) or comes after.
 */
export const CANCELLED_MESSAGES_FEED: MessageFeed = {
  durable: CANCELLED_MESSAGES_DURABLE,
  stream: STREAMS.system,
  filter: MESSAGING_SUBJECTS.messageCancelled.subject,
  parse: (m) => parseFact(m, "cancelled"),
};

/** `sys.message.pending.v1` and `sys.message.cancelled.v1` carry the same fields; the subject says the status. */
function parseFact(m: JsMsg, status: Extract<AnalyticsStatus, "pending" | "cancelled">): Parsed {
  const raw = payloadOf(m);
  if (typeof raw === "string") return raw;
  const fact = MessagePending.safeParse(raw.value);
  if (!fact.success) return `message.${status}: ${fact.error.message}`;
  if (Number.isNaN(Date.parse(fact.data.createdAt))) return `message.${status}: createdAt is not a date`;
  const { organizationId, messageId, createdAt } = fact.data;
  return { event: { organizationId, messageId, createdAt, status }, timestamp: m.info.timestampNanos / 1e6 };
}
