import type { ServiceDefinition, ServiceDeps, ServiceEnv } from "@platform/service";
import { consumeEvents } from "./bus/consumers/events.consumer";
import { DeliveryAttemptEntity, DeliveryJobEntity, StoredEventEntity, WebhookEntity } from "./db/entities";
import { CreateWebhooks1763766000000 } from "./db/migrations/1763766000000-CreateWebhooks";
import { DeliveryRowsWithoutForeignKeys1764050000000 } from "./db/migrations/1764050000000-DeliveryRowsWithoutForeignKeys";
import { DispatcherLiveness1764500000000 } from "./db/migrations/1764500000000-DispatcherLiveness";
import { DeliveryRepository } from "./db/repositories/delivery.repository";
import { WebhookRepository } from "./db/repositories/webhook.repository";
import { envShape } from "./env";
import { webhookRoutes } from "./routes";
import { Dispatcher, type DispatcherOptions } from "./use-cases/dispatcher";
import { HttpSender } from "./use-cases/http-sender";
import { EventIngestor } from "./use-cases/ingest-event";
import { WebhookAdmin } from "./use-cases/webhooks";

type Deps = ServiceDeps<ServiceEnv<typeof envShape>>;

/** One sender per process: its connection pool is shared by deliveries and tests. */
const senders = new WeakMap<Deps, HttpSender>();
function senderOf(deps: Deps): HttpSender {
  let sender = senders.get(deps);
  if (!sender) {
    sender = new HttpSender({ timeoutMs: deps.env.WEBHOOK_TIMEOUT_MS, allowPrivate: deps.env.WEBHOOK_ALLOW_PRIVATE_TARGETS });
    senders.set(deps, sender);
  }
  return sender;
}

/** Attempt outcomes and durations, and webhooks deactivated after consecutive failures. */
function webhookMetrics(deps: Deps): Pick<DispatcherOptions, "onAttempt" | "onDeactivated"> {
  const attempts = deps.metrics.counter("webhook_attempts_total", "Webhook delivery attempts by outcome (delivered, retry, failed)", ["outcome"]);
  const duration = deps.metrics.histogram("webhook_attempt_duration_seconds", "Duration of a webhook delivery attempt", ["outcome"]);
  const deactivations = deps.metrics.counter("webhook_deactivations_total", "Webhooks deactivated after consecutive failed deliveries");
  return {
    onAttempt: (outcome, durationMs) => {
      attempts.inc({ outcome });
      duration.observe({ outcome }, durationMs / 1000);
    },
    onDeactivated: (ids) => deactivations.inc(ids.length),
  };
}

const PRUNE_EVERY_MS = 10 * 60_000;

export const definition: ServiceDefinition<typeof envShape> = {
  name: "webhook-dispatcher",
  schema: "webhooks",
  env: envShape,
  entities: [WebhookEntity, StoredEventEntity, DeliveryJobEntity, DeliveryAttemptEntity],
  migrations: [CreateWebhooks1763766000000, DeliveryRowsWithoutForeignKeys1764050000000, DispatcherLiveness1764500000000],
  // This service publishes no events: no outbox, no relay.
  outbox: false,
  routes: (deps) =>
    webhookRoutes(
      new WebhookAdmin({
        webhooks: new WebhookRepository(deps.db),
        deliveries: new DeliveryRepository(deps.db),
        sender: senderOf(deps),
        log: deps.log,
        allowPrivateTargets: deps.env.WEBHOOK_ALLOW_PRIVATE_TARGETS,
        cursorKey: deps.env.INTERNAL_TOKEN,
      }),
    ),
  async start(deps) {
    const repo = new DeliveryRepository(deps.db);
    const sender = senderOf(deps);
    const dispatcher = new Dispatcher({
      repo,
      sender,
      log: deps.log,
      retryDelaysMs: deps.env.WEBHOOK_RETRY_DELAYS_MS,
      timeoutMs: deps.env.WEBHOOK_TIMEOUT_MS,
      perWebhook: deps.env.WEBHOOK_CONCURRENCY_PER_ENDPOINT,
      ...webhookMetrics(deps),
    });
    dispatcher.start();
    await consumeEvents(deps.bus, new EventIngestor(repo, dispatcher, deps.log));
    const prune = setInterval(() => {
      repo.prune().catch((err) => deps.log.warn({ err: (err as Error).message }, "pruning old deliveries failed"));
    }, PRUNE_EVERY_MS);
    prune.unref();
    // Closers run in reverse: the bus (registered earlier) closes after these.
    return [() => clearInterval(prune), () => sender.close(), () => dispatcher.stop()];
  },
};

export { envShape } from "./env";
export { EVENTS_DURABLE } from "./bus/consumers/events.consumer";
