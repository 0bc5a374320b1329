import { Router } from "express";
import type { ServiceDefinition } from "@platform/service";
import { MessageEventIngestor, STATUS_EVENTS_FEED } from "./bus/consumers/evt.message.status.consumer";
import { CANCELLED_MESSAGES_FEED, PENDING_MESSAGES_FEED } from "./bus/consumers/sys.message.facts.consumer";
import { entities } from "./db/entities";
import { CreateAnalyticsSchema1763900000000 } from "./db/migrations/1763900000000-CreateAnalyticsSchema";
import { CancelledBetweenPendingAndSent1764800000000 } from "./db/migrations/1764800000000-CancelledBetweenPendingAndSent";
import { envShape } from "./env";
import { v1AnalyticsGet } from "./routes/v1_analytics_get";
import { createContext, SCHEMA } from "./use-cases/context";

/**
 * analytics: outbound message counts and rates by creation time and current
 * status, fed only by the message events (docs/adr/0007-analytics-buckets.md).
 */
export const definition: ServiceDefinition<typeof envShape> = {
  name: "analytics",
  schema: SCHEMA,
  env: envShape,
  entities,
  migrations: [CreateAnalyticsSchema1763900000000, CancelledBetweenPendingAndSent1764800000000],
  // Publishes no events: no outbox.
  outbox: false,
  routes(deps) {
    const ctx = createContext(deps);
    const router = Router();
    v1AnalyticsGet(router, ctx);
    return router;
  },
  async start(deps) {
    // The status events, the messages their first attempt left pending, and the template sends a cancel ended unsent:
    // three feeds into the one statement.
    const ingestors = [STATUS_EVENTS_FEED, PENDING_MESSAGES_FEED, CANCELLED_MESSAGES_FEED].map(
      (feed) =>
        new MessageEventIngestor({
          feed,
          db: deps.db,
          bus: deps.bus,
          log: deps.log,
          batchMax: deps.env.ANALYTICS_BATCH_MAX,
          maxAckPending: deps.env.ANALYTICS_MAX_ACK_PENDING,
          ackWaitMs: deps.env.ANALYTICS_ACK_WAIT_MS,
        }),
    );
    for (const ingestor of ingestors) await ingestor.start();
    return ingestors.map((ingestor) => () => ingestor.stop());
  },
};

export { envShape } from "./env";
export { MessageEventIngestor, MESSAGE_EVENTS_DURABLE, STATUS_EVENTS_FEED } from "./bus/consumers/evt.message.status.consumer";
export { CANCELLED_MESSAGES_DURABLE, CANCELLED_MESSAGES_FEED, PENDING_MESSAGES_DURABLE, PENDING_MESSAGES_FEED } from "./bus/consumers/sys.message.facts.consumer";
export { applyStatusEvents, STATUS_RANK, type AnalyticsStatus, type StatusEvent } from "./use-cases/apply-statuses";
export { planQuery, queryAnalytics } from "./use-cases/query-analytics";
