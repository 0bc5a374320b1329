import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { RPC, STREAMS } from "@platform/contracts";
import { createDataSource, ensureDatabase } from "@platform/db";
import { createLogger, currentRequestContext, withRequestContext } from "@platform/logging";
import { createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { extractTrace, traceparentOf } from "@platform/telemetry";
import { Bus, domainEvent, enqueue, OutboxRelay, outboxRequestIdSql, outboxTableSql, outboxTraceSql, PermanentError, RetryableError, RpcCallError } from "../src";

const log = createLogger("bus-test", "silent");
const Payload = z.object({ n: z.number() });

describe("bus (real NATS)", () => {
  let env: TestEnvironment;
  let bus: Bus;

  before(async () => {
    env = await createTestEnvironment("bus");
    bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bus-test", log });
    await bus.ensureStreams();
  });
  after(async () => {
    await bus.close();
    await env.cleanup();
  });

  it("creates streams with one replica by default and passes BUS_STREAM_REPLICAS to the server", async () => {
    const info = await bus.jsm.streams.info(bus.streamName(STREAMS.work));
    expect(info.config.num_replicas).to.equal(1);
    // A single server refuses 3 replicas: the setting reaches JetStream (a 3-node cluster accepts it).
    const three = await Bus.connect({ url: env.natsUrl, namespace: `${env.namespace}_r3`, name: "bus-test-r3", log, streamReplicas: 3 });
    try {
      const err = await three.ensureStreams([STREAMS.work]).then(() => null, (e: Error) => e);
      expect(err?.message).to.match(/replicas/i);
    } finally {
      await three.close();
    }
  });

  it("drops a publish repeated with the same message id", async () => {
    await bus.publish("work.dedupe.v1", { n: 1 }, { msgId: "same" });
    await bus.publish("work.dedupe.v1", { n: 1 }, { msgId: "same" });
    const info = await bus.jsm.streams.info(bus.streamName(STREAMS.work));
    expect(info.state.messages).to.equal(1);
  });

  it("publishes one message with the request's id, dedupes only with a message id, and rejects what JetStream or the client refuses", async () => {
    const stream = bus.streamName(STREAMS.work);
    const first = (await bus.jsm.streams.info(stream)).state.last_seq;
    await withRequestContext({ requestId: "req_one" }, () => bus.publish("work.one.v1", { n: 1 }));
    await bus.publish("work.one.v1", { n: 1 });
    const info = await bus.jsm.streams.info(stream);
    expect(info.state.last_seq - first, "without a message id, nothing is dropped").to.equal(2);
    const m = await bus.jsm.streams.getMessage(stream, { seq: first + 1 });
    expect(m.header.get("X-Request-Id")).to.equal("req_one");
    expect(m.header.get("Nats-Msg-Id")).to.equal("");
    const refused = await bus.publish("nostream.one.v1", { n: 1 }, { msgId: "nostream-one" }).then(() => null, (e: Error) => e);
    expect(refused?.message).to.match(/503/);
    // The gateway answers 413 on this code (a batch larger than the bus stores, even gzipped: random bytes).
    const tooLarge = await bus.publish("work.one.v1", randomBytes(1_600_000).toString("base64")).then(() => null, (e: Error & { code?: string }) => e);
    expect((tooLarge as { code?: string } | null)?.code).to.equal("MAX_PAYLOAD_EXCEEDED");
    expect((bus as unknown as { pubAcks: { waiting: Map<string, unknown> } }).pubAcks.waiting.size).to.equal(0);
  });

  it("publishes a batch in order, each with its Nats-Msg-Id and headers; the same batch again, twice at once, adds nothing", async () => {
    const stream = bus.streamName(STREAMS.work);
    const first = (await bus.jsm.streams.info(stream)).state.last_seq;
    const items = Array.from({ length: 60 }, (_, i) => ({ subject: "work.batch.v1", payload: i % 2 ? JSON.stringify({ n: i }) : { n: i }, msgId: `batch-${i}`, headers: { "X-Request-Id": `req-${i}` } }));
    await bus.publishBatch(items);
    // A redelivery of the same rows (a relay that died between publish and delete, and its successor) while another runs.
    await Promise.all([bus.publishBatch(items), bus.publishBatch(items.slice(10, 40))]);
    const info = await bus.jsm.streams.info(stream);
    expect(info.state.last_seq - first).to.equal(60);
    for (let i = 0; i < 60; i++) {
      const m = await bus.jsm.streams.getMessage(stream, { seq: first + 1 + i });
      expect(m.header.get("Nats-Msg-Id")).to.equal(`batch-${i}`);
      expect(m.header.get("X-Request-Id")).to.equal(`req-${i}`);
      expect(m.json()).to.deep.equal({ n: i });
    }
  });

  it("rejects a batch JetStream refuses (no stream takes the subject), without waiting for the ack timeout's end", async () => {
    const err = await bus.publishBatch([{ subject: "nostream.batch.v1", payload: { n: 1 }, msgId: "nostream-1" }]).then(() => null, (e: Error) => e);
    expect(err?.message).to.match(/503/);
  });

  it("rejects a batch on a closed connection at once, leaving no waiter behind", async () => {
    const other = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bus-test-closed", log });
    await other.publishBatch([{ subject: "work.closed.v1", payload: { n: 0 }, msgId: "closed-0" }]);
    await other.close();
    const err = await other.publishBatch([{ subject: "work.closed.v1", payload: { n: 1 }, msgId: "closed-1" }]).then(() => null, (e: Error) => e);
    expect(err?.message).to.match(/closed/i);
    expect((other as unknown as { pubAcks: { waiting: Map<string, unknown> } }).pubAcks.waiting.size).to.equal(0);
  });

  it("stores a payload near the server's max_payload gzipped (Content-Encoding: gzip) and hands the consumer what was published; smaller ones as they are", async () => {
    const Big = z.object({ body: z.string(), n: z.number() });
    const seen: Array<z.infer<typeof Big>> = [];
    await bus.consume({
      stream: STREAMS.work,
      durable: "big-test",
      subject: { subject: "work.big.v1", schema: Big },
      handler: async (p) => {
        seen.push(p);
      },
    });
    const stream = bus.streamName(STREAMS.work);
    const first = (await bus.jsm.streams.info(stream)).state.last_seq;
    // A 1 MB JSON body inside an envelope: escaping alone takes it past NATS' default 1 MB max_payload.
    const body = JSON.stringify({ entry: [{ pad: "a\"b".repeat(262_100) }] });
    expect(body.length).to.be.within(1_048_000, 1_048_576);
    await bus.publish("work.big.v1", { body, n: 1 }, { msgId: "big-1" });
    await bus.publish("work.big.v1", { body: "small", n: 2 }, { msgId: "big-2" });
    await eventually(() => seen.length === 2, 5_000);
    expect(seen.find((p) => p.n === 1)?.body === body, "the big body, byte for byte").to.equal(true);
    expect(seen.find((p) => p.n === 2)?.body).to.equal("small");
    const stored = [await bus.jsm.streams.getMessage(stream, { seq: first + 1 }), await bus.jsm.streams.getMessage(stream, { seq: first + 2 })];
    expect(stored.map((m) => m.header.get("Content-Encoding"))).to.deep.equal(["gzip", ""]);
    expect(stored[0].data.length).to.be.below(64 * 1024);
  });

  it("retries a retryable failure and acks on success", async () => {
    const seen: number[] = [];
    await bus.consume({
      stream: STREAMS.work,
      durable: "retry-test",
      subject: { subject: "work.retry.v1", schema: Payload },
      handler: async (p, ctx) => {
        seen.push(ctx.deliveryCount);
        if (ctx.deliveryCount < 3) throw new RetryableError("not yet", 50);
      },
    });
    await bus.publish("work.retry.v1", { n: 7 }, { msgId: "r1" });
    await eventually(() => seen.length === 3, 5_000);
    expect(seen).to.deep.equal([1, 2, 3]);
  });

  /**
   * A gated consumer on its own connection: while `busy`, each handler finishes after `busyWait`; once calm, handlers
   * wait for `release`. Records the most in flight while busy and while calm, and how often each message ran.
   */
  async function gatedConsumer(name: string, opts: { concurrency: number; yieldUnderLoad: true | "pause"; calm: (maxMs: number) => Promise<void>; busyWait: () => Promise<unknown> }) {
    const state = { busy: true, inFlight: 0, maxBusy: 0, maxCalm: 0, seen: new Map<number, number>() };
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const gated = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: `bus-test-${name}`, log });
    gated.setLoadGate({ get busy() { return state.busy; }, calm: opts.calm });
    await gated.consume({
      stream: STREAMS.work,
      durable: `${name}-test`,
      subject: { subject: `work.${name}.v1`, schema: Payload },
      concurrency: opts.concurrency,
      yieldUnderLoad: opts.yieldUnderLoad,
      handler: async (p) => {
        state.inFlight++;
        if (state.busy) state.maxBusy = Math.max(state.maxBusy, state.inFlight);
        else state.maxCalm = Math.max(state.maxCalm, state.inFlight);
        await (state.busy ? opts.busyWait() : released);
        state.seen.set(p.n, (state.seen.get(p.n) ?? 0) + 1);
        state.inFlight--;
      },
    });
    const publish = (count: number) => Promise.all(Array.from({ length: count }, (_, n) => gated.publish(`work.${name}.v1`, { n }, { msgId: `${name}-${n}` })));
    return { state, release, publish, close: () => gated.close() };
  }

  it("a consumer that yields under load keeps an eighth of its concurrency in flight while the process is busy, and handles every message once", async () => {
    const calmWaiters: Array<() => void> = [];
    const c = await gatedConsumer("yield", {
      concurrency: 16,
      yieldUnderLoad: true,
      calm: (maxMs) =>
        new Promise<void>((resolve) => {
          calmWaiters.push(resolve);
          setTimeout(resolve, maxMs);
        }),
      busyWait: () => new Promise((r) => setTimeout(r, 20)),
    });
    try {
      await c.publish(60);
      await eventually(() => c.state.seen.size >= 20, 10_000);
      // Calm again: the rest run at full concurrency.
      c.state.busy = false;
      for (const w of calmWaiters.splice(0)) w();
      // Held until more than the busy cap run at once.
      await eventually(() => c.state.inFlight > 2, 10_000);
      c.release();
      await eventually(() => c.state.seen.size === 60, 10_000);
      expect(c.state.maxBusy).to.be.within(1, 2); // 16 / 8
      expect(c.state.maxCalm).to.be.greaterThan(2);
      expect([...c.state.seen.values()].every((n) => n === 1)).to.equal(true);
    } finally {
      await c.close();
    }
  });

  it("a consumer that pauses under load keeps one message in flight while the process is busy, and handles every message once", async () => {
    let calmCalls = 0;
    const c = await gatedConsumer("pause", {
      concurrency: 8,
      yieldUnderLoad: "pause",
      calm: (maxMs) => {
        calmCalls++;
        return new Promise<void>((resolve) => setTimeout(resolve, Math.min(maxMs, 5)));
      },
      busyWait: () => new Promise((r) => setImmediate(r)),
    });
    try {
      await c.publish(40);
      await eventually(() => c.state.seen.size >= 10, 10_000);
      // One at a time, and a pause asked for before the next one.
      expect(c.state.maxBusy).to.equal(1);
      expect(calmCalls).to.be.at.least(9);
      c.state.busy = false;
      await eventually(() => c.state.inFlight > 1, 10_000);
      c.release();
      await eventually(() => c.state.seen.size === 40, 10_000);
      expect(c.state.maxCalm).to.be.greaterThan(1);
      expect([...c.state.seen.values()].every((n) => n === 1)).to.equal(true);
    } finally {
      await c.close();
    }
  });

  it("acks the messages handled in one turn of the event loop in one socket write, each message once", async () => {
    const consumer = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bus-test-acks", log });
    try {
      const handled: number[] = [];
      await consumer.consume({
        stream: STREAMS.work,
        durable: "acks-test",
        subject: { subject: "work.acks.v1", schema: Payload },
        concurrency: 64,
        handler: async (p) => {
          handled.push(p.n);
        },
      });
      // Every frame this connection writes to its socket (acks, pulls, pings).
      const transport = (consumer.nc as unknown as { protocol: { transport: { send(frame: Uint8Array): void } } }).protocol.transport;
      let writes = 0;
      const send = transport.send.bind(transport);
      transport.send = (frame) => {
        writes++;
        send(frame);
      };
      const n = 300;
      await Promise.all(Array.from({ length: n }, (_, k) => bus.publish("work.acks.v1", { n: k }, { msgId: `acks-${k}` })));
      const info = () => consumer.jsm.consumers.info(consumer.streamName(STREAMS.work), "acks-test");
      await eventually(async () => {
        const i = await info();
        return handled.length >= n && i.num_pending === 0 && i.num_ack_pending === 0;
      }, 10_000);
      expect([...handled].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: n }, (_, k) => k));
      expect((await info()).num_redelivered).to.equal(0);
      // One write per message before; the messages of a read arrive together, so their acks now share writes.
      expect(writes).to.be.lessThan(n / 3);
    } finally {
      await consumer.close();
    }
  });

  it("dead-letters a permanent failure and an unparsable payload", async () => {
    await bus.consume({
      stream: STREAMS.work,
      durable: "dlq-test",
      subject: { subject: "work.poison.v1", schema: Payload },
      handler: async () => {
        throw new PermanentError("never");
      },
    });
    await bus.publish("work.poison.v1", { n: 1 }, { msgId: "p1" });
    await bus.publish("work.poison.v1", { wrong: true }, { msgId: "p2" });
    await eventually(async () => (await bus.jsm.streams.info(bus.streamName(STREAMS.deadLetter))).state.messages === 2, 5_000);
  });

  it("answers request/reply and carries typed errors", async () => {
    // Nothing answered yet: not serving (the load gate lets consumers run at full concurrency).
    expect(bus.servingRequests(60_000)).to.equal(false);
    bus.serve(RPC.checkOptOuts, async (req) => {
      if (req.organizationId === "boom") throw new RpcCallError("CHANNEL_NOT_FOUND", "no channel", false);
      return { optedOut: req.phones.filter((p) => p.endsWith("1")) };
    });
    const res = await bus.request(RPC.checkOptOuts, { organizationId: "o", messagingChannelId: "c", phones: ["+1", "+2"] });
    expect(res.optedOut).to.deep.equal(["+1"]);
    expect(bus.servingRequests(60_000)).to.equal(true);
    try {
      await bus.request(RPC.checkOptOuts, { organizationId: "boom", messagingChannelId: "c", phones: ["+1"] });
      expect.fail("should throw");
    } catch (err) {
      expect(err).to.be.instanceOf(RpcCallError);
      expect((err as RpcCallError).code).to.equal("CHANNEL_NOT_FOUND");
      expect((err as RpcCallError).retryable).to.equal(false);
    }
  });

  it("relays outbox rows to JetStream after commit, once", async () => {
    await ensureDatabase(env.databaseUrl);
    const ds = createDataSource({ url: env.databaseUrl, schema: "relaytest", entities: [], migrations: [] });
    await ds.initialize();
    await ds.query(`CREATE SCHEMA IF NOT EXISTS relaytest`);
    for (const sql of [...outboxTableSql("relaytest").up, ...outboxRequestIdSql("relaytest").up, ...outboxTraceSql("relaytest").up]) await ds.query(sql);
    const relay = new OutboxRelay({ databaseUrl: env.databaseUrl, schema: "relaytest", bus, log });
    relay.start();
    const received: string[] = [];
    const headersOf = new Map<string, Record<string, string>>();
    await bus.consume({
      stream: STREAMS.events,
      durable: "outbox-test",
      subject: { subject: "evt.>", schema: z.any() },
      handler: async (p, ctx) => {
        received.push(p.data.id);
        headersOf.set(p.data.id, ctx.headers);
      },
    });
    // Written inside a request: the row keeps its request id and trace context, published as headers.
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const evt = withRequestContext({ requestId: "req_outbox", trace: extractTrace((n) => (n === "traceparent" ? traceparent : undefined)) }, () =>
      domainEvent("webhook.test", "org_x", { webhookId: "wh_1" }),
    );
    await ds.transaction((m) => enqueue(m, "relaytest", [evt]));
    // A rolled-back transaction publishes nothing.
    await ds.transaction(async (m) => {
      await enqueue(m, "relaytest", [domainEvent("webhook.test", "org_x", { webhookId: "wh_2" })]);
      throw new Error("rollback");
    }).catch(() => undefined);
    await eventually(() => received.length >= 1, 5_000);
    expect(received).to.deep.equal([evt.msgId]);
    expect(headersOf.get(evt.msgId)).to.include({ "X-Request-Id": "req_outbox", traceparent });
    // A message stamped with its own origin (a statement batching several requests) keeps it, whatever the context.
    const other = { ...domainEvent("webhook.test", "org_x", { webhookId: "wh_3" }), requestId: "req_other", traceparent: null };
    await withRequestContext({ requestId: "req_batch" }, () => ds.transaction((m) => enqueue(m, "relaytest", [other])));
    await eventually(() => headersOf.has(other.msgId), 5_000);
    expect(headersOf.get(other.msgId)?.["X-Request-Id"]).to.equal("req_other");
    expect(headersOf.get(other.msgId)).to.not.have.property("traceparent");
    // Deleted right after publishing.
    await eventually(async () => (await ds.query(`SELECT count(*)::int AS n FROM relaytest.outbox`))[0].n === 0, 5_000);
    await relay.stop();
    await ds.destroy();
  });

  it("publishes every committed row once per id when drains run concurrently (a redelivery of the same rows), and a fresh relay publishes what a stopped one left", async () => {
    await ensureDatabase(env.databaseUrl);
    const ds = createDataSource({ url: env.databaseUrl, schema: "relaydup", entities: [], migrations: [] });
    await ds.initialize();
    await ds.query(`CREATE SCHEMA IF NOT EXISTS relaydup`);
    for (const sql of [...outboxTableSql("relaydup").up, ...outboxRequestIdSql("relaydup").up, ...outboxTraceSql("relaydup").up]) await ds.query(sql);
    const received: string[] = [];
    await bus.consume({
      stream: STREAMS.events,
      durable: "outbox-dup-test",
      subject: { subject: "evt.webhook.test.v1", schema: z.any() },
      handler: async (p) => {
        if (p.data.webhookId?.startsWith("dup_")) received.push(p.data.id);
      },
    });
    // Committed while no relay runs (the writer's process died after commit): nothing is lost.
    const events = Array.from({ length: 40 }, (_, i) => domainEvent("webhook.test", "org_x", { webhookId: `dup_${i}` }));
    await ds.transaction((m) => enqueue(m, "relaydup", events.slice(0, 20)));
    await ds.transaction((m) => enqueue(m, "relaydup", events.slice(20)));
    const relay = new OutboxRelay({ databaseUrl: env.databaseUrl, schema: "relaydup", bus, log, batchSize: 25 });
    relay.start();
    await eventually(() => relay.active, 5_000);
    // Drains racing the relay's own loop: they read the same rows and publish them again before either deletes.
    await Promise.all([relay.drainOnce(), relay.drainOnce(), relay.drainOnce()]);
    await eventually(async () => (await ds.query(`SELECT count(*)::int AS n FROM relaydup.outbox`))[0].n === 0, 5_000);
    await eventually(() => received.length >= 40, 5_000);
    const stream = bus.streamName(STREAMS.events);
    const ids: string[] = [];
    const info = await bus.jsm.streams.info(stream);
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await bus.jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
      const id = m?.header.get("Nats-Msg-Id");
      if (id && events.some((e) => e.msgId === id)) ids.push(id);
    }
    expect(ids, "each event once in the stream, in id order").to.deep.equal(events.map((e) => e.msgId));
    expect([...received].sort()).to.deep.equal(events.map((e) => e.msgId).sort());
    await relay.stop();
    await ds.destroy();
  });

  it("runs one relay per schema across replicas; another takes over when it stops", async () => {
    await ensureDatabase(env.databaseUrl);
    const ds = createDataSource({ url: env.databaseUrl, schema: "relayha", entities: [], migrations: [] });
    await ds.initialize();
    await ds.query(`CREATE SCHEMA IF NOT EXISTS relayha`);
    for (const sql of [...outboxTableSql("relayha").up, ...outboxRequestIdSql("relayha").up, ...outboxTraceSql("relayha").up]) await ds.query(sql);
    const options = { databaseUrl: env.databaseUrl, schema: "relayha", bus, log, standbyRetryMs: 100 };
    const a = new OutboxRelay(options);
    const b = new OutboxRelay(options);
    a.start();
    await eventually(() => a.active, 5_000);
    b.start();
    const received: string[] = [];
    await bus.consume({
      stream: STREAMS.events,
      durable: "outbox-ha-test",
      subject: { subject: "evt.webhook.test.v1", schema: z.any() },
      handler: async (p) => {
        if (p.data.webhookId?.startsWith("ha_")) received.push(p.data.webhookId);
      },
    });
    const send = (id: string) => ds.transaction((m) => enqueue(m, "relayha", [domainEvent("webhook.test", "org_x", { webhookId: id })]));
    await send("ha_1");
    await eventually(() => received.length === 1, 5_000);
    expect(b.active, "one relay at a time").to.equal(false);
    // The standby keeps one connection while it waits (no reconnect per try).
    const relayPids = async () =>
      (await ds.query(`SELECT pid FROM pg_stat_activity WHERE application_name = 'relayha:outbox-relay' ORDER BY pid`)).map((r: { pid: number }) => r.pid);
    const before = await relayPids();
    await new Promise((r) => setTimeout(r, 350));
    expect(before).to.have.length(2);
    expect(await relayPids()).to.deep.equal(before);

    await a.stop();
    await send("ha_2");
    await eventually(() => received.length === 2, 5_000);
    expect(b.active).to.equal(true);
    expect(received).to.deep.equal(["ha_1", "ha_2"]);
    await b.stop();
    await ds.destroy();
  });
});

describe("bus: request id across NATS and consumer metrics (real NATS)", () => {
  let env: TestEnvironment;
  let bus: Bus;

  before(async () => {
    env = await createTestEnvironment("busctx");
    bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bus-ctx-test", log });
    await bus.ensureStreams();
  });
  after(async () => {
    await bus.close();
    await env.cleanup();
  });

  it("carries the publishing request's id to the consumer's context and headers, and reports handled deliveries", async () => {
    const seen: Array<{ header?: string; requestId?: string; organizationId?: string; deliveryCount: number }> = [];
    const handled: string[] = [];
    bus.setObserver({ handled: (durable, outcome, deliveryCount) => handled.push(`${durable}:${outcome}:${deliveryCount}`) });
    const Org = z.object({ organizationId: z.string(), n: z.number() });
    await bus.consume({
      stream: STREAMS.work,
      durable: "ctx-test",
      subject: { subject: "work.ctx.v1", schema: Org },
      handler: async (_p, ctx) => {
        const current = currentRequestContext();
        seen.push({ header: ctx.headers["X-Request-Id"], requestId: current?.requestId, organizationId: current?.organizationId, deliveryCount: ctx.deliveryCount });
        if (ctx.deliveryCount < 2) throw new RetryableError("again", 20);
      },
    });
    await withRequestContext({ requestId: "req_abc" }, () => bus.publish("work.ctx.v1", { organizationId: "org_9", n: 1 }, { msgId: "c1" }));
    await eventually(() => handled.length === 2, 5_000);
    expect(seen).to.deep.equal([
      { header: "req_abc", requestId: "req_abc", organizationId: "org_9", deliveryCount: 1 },
      { header: "req_abc", requestId: "req_abc", organizationId: "org_9", deliveryCount: 2 },
    ]);
    expect(handled).to.deep.equal(["ctx-test:retry:1", "ctx-test:ack:2"]);
    const states = await bus.consumerStates();
    expect(states.map((s) => [s.durable, s.pending])).to.deep.equal([["ctx-test", 0]]);
  });

  it("carries the request id over request/reply", async () => {
    const def = { subject: "rpc.ctx.test.v1", request: z.object({ organizationId: z.string() }), response: z.object({ requestId: z.string(), organizationId: z.string() }) };
    bus.serve(def, async () => ({ requestId: currentRequestContext()?.requestId ?? "", organizationId: currentRequestContext()?.organizationId ?? "" }));
    const answer = await withRequestContext({ requestId: "req_rpc" }, () => bus.request(def, { organizationId: "org_1" }));
    expect(answer).to.deep.equal({ requestId: "req_rpc", organizationId: "org_1" });
  });

  it("passes the W3C trace context (traceparent) on over request/reply unchanged when tracing is off", async () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const def = { subject: "rpc.trace.test.v1", request: z.object({}), response: z.object({ traceparent: z.string() }) };
    bus.serve(def, async () => ({ traceparent: traceparentOf(currentRequestContext()?.trace) ?? "" }));
    const trace = extractTrace((name) => (name === "traceparent" ? traceparent : undefined));
    const answer = await withRequestContext({ requestId: "req_t", trace }, () => bus.request(def, {}));
    expect(answer).to.deep.equal({ traceparent });
  });
});
