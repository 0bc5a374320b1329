import type { RequestHandler, Router } from "express";
import express from "express";
import client from "prom-client";

/**
 * The platform's own metrics, by the service that exposes them (beyond
 * `http_request_duration_seconds` and Node's defaults, which every service
 * has). The dashboard and alert rules (k8s/observability) may query these;
 * test-e2e's metrics test scrapes every service and finds each one.
 */
export const PLATFORM_METRICS = {
  /** Every service that consumes the bus (instrumentBus). */
  bus: ["bus_messages_handled_total", "bus_redeliveries_total", "bus_handler_duration_seconds", "bus_consumer_pending", "bus_consumer_ack_pending", "bus_consumer_redelivered_pending"],
  /** Every service with an outbox (instrumentOutbox). */
  outbox: ["outbox_depth", "outbox_oldest_age_seconds", "outbox_relay_active", "outbox_published_total"],
  gateway: ["gateway_rate_limit_rejections_total", "gateway_rate_limit_sync_messages_total", "gateway_upstream_in_flight", "gateway_upstream_busy_total"],
  messaging: ["provider_calls_total", "provider_call_duration_seconds"],
  "webhook-dispatcher": ["webhook_attempts_total", "webhook_attempt_duration_seconds", "webhook_deactivations_total"],
  "template-jobs": ["template_job_recipients_total", "template_jobs"],
} as const;

/** Latency buckets (seconds) of the platform's histograms. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

/** The sampling interval of the event-loop delay histogram (`nodejs_eventloop_lag_*_seconds`). */
export const EVENT_LOOP_MONITORING_MS = 50;

/** One Prometheus registry per process, with default Node metrics and the service label. */
export function createMetrics(service: string) {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service });
  // The event-loop delay histogram samples every 50 ms, not prom-client's 10: a 10 ms timer woke every idle process
  // 100 times a second, most of what an idle stack burnt (bench/RESULTS.md). Its figures include the 50 ms interval;
  // `nodejs_eventloop_lag_seconds` (measured at scrape time) does not.
  client.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_MS });
  const httpDuration = new client.Histogram({
    name: "http_request_duration_seconds",
    help: "HTTP request duration by route and status",
    labelNames: ["method", "route", "status"],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });

  const middleware: RequestHandler = (req, res, next) => {
    const end = httpDuration.startTimer();
    res.on("finish", () => {
      // The matched route pattern keeps label cardinality bounded; unmatched paths share one label.
      const route = (req.route?.path as string | undefined) ?? (res.statusCode === 404 ? "unmatched" : req.baseUrl || "other");
      end({ method: req.method, route: String(route), status: String(res.statusCode) });
    });
    next();
  };

  const router: Router = express.Router();
  router.get("/metrics", async (_req, res) => {
    res.setHeader("Content-Type", registry.contentType);
    res.send(await registry.metrics());
  });

  /** The same histogram for handlers outside express (the gateway's /api/v1 front): call when the request starts. */
  const track = (method: string, res: { statusCode: number; on(event: "finish", cb: () => void): unknown }, route: () => string) => {
    const end = httpDuration.startTimer();
    res.on("finish", () => end({ method, route: route(), status: String(res.statusCode) }));
  };

  /** A counter in this registry; asking twice for one name answers the same counter. */
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) =>
    (registry.getSingleMetric(name) as client.Counter<L> | undefined) ??
    new client.Counter<L>({ name, help, labelNames: labelNames as L[], registers: [registry] });

  /** A gauge in this registry (`collect` runs on every scrape); one per name. */
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[] = [], collect?: (this: client.Gauge<L>) => Promise<void> | void) =>
    (registry.getSingleMetric(name) as client.Gauge<L> | undefined) ??
    new client.Gauge<L>({ name, help, labelNames: labelNames as L[], registers: [registry], collect });

  /** A histogram in this registry (seconds); one per name. */
  const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[] = [], buckets = LATENCY_BUCKETS) =>
    (registry.getSingleMetric(name) as client.Histogram<L> | undefined) ??
    new client.Histogram<L>({ name, help, labelNames: labelNames as L[], buckets, registers: [registry] });

  return { registry, middleware, router, client, track, counter, gauge, histogram };
}
export type Metrics = ReturnType<typeof createMetrics>;

/** The parts of `Bus` the bus metrics read (structural, so this package needs no bus dependency). */
export interface ObservableBus {
  setObserver(observer: { handled(durable: string, outcome: string, deliveryCount: number, seconds: number): void }): void;
  consumerStates(): Promise<Array<{ durable: string; stream: string; pending: number; ackPending: number; redelivered: number }>>;
}

/**
 * Bus metrics: deliveries handled per durable consumer and outcome, their
 * handling time, redeliveries, and on every scrape each consumer's lag
 * (`pending`) and unacknowledged count as the server reports them.
 */
export function instrumentBus(metrics: Metrics, bus: ObservableBus): void {
  const handled = metrics.counter("bus_messages_handled_total", "Deliveries handled by a durable consumer, by outcome (ack, retry, dead_letter)", ["durable", "outcome"]);
  const redeliveries = metrics.counter("bus_redeliveries_total", "Deliveries that were not the message's first (deliveryCount > 1), per durable consumer", ["durable"]);
  const duration = metrics.histogram("bus_handler_duration_seconds", "Time a consumer's handler took per delivery", ["durable"]);
  bus.setObserver({
    handled(durable, outcome, deliveryCount, seconds) {
      handled.inc({ durable, outcome });
      if (deliveryCount > 1) redeliveries.inc({ durable });
      duration.observe({ durable }, seconds);
    },
  });
  const states = async () => (await bus.consumerStates().catch(() => [])) ?? [];
  let last: Promise<Awaited<ReturnType<typeof states>>> | undefined;
  // The three gauges of one scrape share one round of consumer-info requests.
  const read = () => {
    last ??= states().finally(() => setImmediate(() => (last = undefined)));
    return last;
  };
  metrics.gauge("bus_consumer_pending", "Messages of a durable consumer's subject not yet delivered (consumer lag)", ["durable", "stream"], async function () {
    this.reset();
    for (const s of await read()) this.set({ durable: s.durable, stream: s.stream }, s.pending);
  });
  metrics.gauge("bus_consumer_ack_pending", "Messages delivered to a durable consumer and not yet acknowledged", ["durable", "stream"], async function () {
    this.reset();
    for (const s of await read()) this.set({ durable: s.durable, stream: s.stream }, s.ackPending);
  });
  metrics.gauge("bus_consumer_redelivered_pending", "Unacknowledged messages that were delivered more than once", ["durable", "stream"], async function () {
    this.reset();
    for (const s of await read()) this.set({ durable: s.durable, stream: s.stream }, s.redelivered);
  });
}

/** The parts of `OutboxRelay` the outbox metrics read. */
export interface ObservableOutbox {
  readonly active: boolean;
  readonly published: number;
  backlog(): Promise<{ schema: string; depth: number; oldestAgeSeconds: number } | undefined>;
}

/**
 * Outbox metrics for one schema: rows waiting and the age of the oldest (read
 * on each scrape by the replica that is the relay; standbys report nothing),
 * messages published, and whether this replica is the relay.
 */
export function instrumentOutbox(metrics: Metrics, schema: string, relay: ObservableOutbox): void {
  const backlog = async () => (relay.active ? await relay.backlog().catch(() => undefined) : undefined);
  let last: ReturnType<typeof backlog> | undefined;
  const read = () => {
    last ??= backlog().finally(() => setImmediate(() => (last = undefined)));
    return last;
  };
  metrics.gauge("outbox_depth", "Outbox rows not yet published (reported by the active relay)", ["schema"], async function () {
    this.reset();
    const b = await read();
    if (b) this.set({ schema }, b.depth);
  });
  metrics.gauge("outbox_oldest_age_seconds", "Age of the oldest unpublished outbox row; 0 when empty (reported by the active relay)", ["schema"], async function () {
    this.reset();
    const b = await read();
    if (b) this.set({ schema }, b.oldestAgeSeconds);
  });
  metrics.gauge("outbox_relay_active", "1 on the replica that is the schema's outbox relay", ["schema"], function () {
    this.set({ schema }, relay.active ? 1 : 0);
  });
  if (!metrics.registry.getSingleMetric("outbox_published_total")) {
    let seen = 0;
    // Counted from the relay's own tally at scrape time: nothing added to the drain loop.
    new client.Counter({
      name: "outbox_published_total",
      help: "Outbox messages published to the bus by this replica",
      labelNames: ["schema"],
      registers: [metrics.registry],
      collect() {
        const now = relay.published;
        if (now > seen) this.inc({ schema }, now - seen);
        seen = now;
      },
    });
  }
}

/** Outcome label of a provider call: `sent`, or `transient`/`permanent` failure. */
export type ProviderOutcome = "sent" | "transient" | "permanent";

/** Provider call metrics: calls by outcome and error code, and their latency. Answers the observer a provider client takes. */
export function providerCallObserver(metrics: Metrics): (result: { ok: boolean; kind?: string; code?: string }, seconds: number) => void {
  const calls = metrics.counter("provider_calls_total", "Calls to the messaging provider by outcome (sent, transient, permanent) and error code", ["outcome", "code"]);
  const latency = metrics.histogram("provider_call_duration_seconds", "Duration of a provider call, request to whole answer", ["outcome"]);
  return (result, seconds) => {
    const outcome = result.ok ? "sent" : (result.kind ?? "transient");
    calls.inc({ outcome, code: result.ok ? "" : (result.code ?? "") });
    latency.observe({ outcome }, seconds);
  };
}
