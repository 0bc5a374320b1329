// CPU of this process per outbox row relayed (select, publish, delete) with a worktree's @platform/bus.
// usage: node bench/micro/relay-cpu.js <worktree> [rows] [batchSize]
const wt = process.argv[2];
const ROWS = Number(process.argv[3] ?? 20000);
const BATCH = Number(process.argv[4] ?? 20);
const r = (p) => require(require.resolve(p, { paths: [`${wt}/services/messaging`] }));
require(require.resolve("reflect-metadata", { paths: [`${wt}/services/messaging`] }));
const { createTestEnvironment } = r("@platform/testing");
const { createDataSource, ensureDatabase } = r("@platform/db");
const { createLogger } = r("@platform/logging");
const { Bus, OutboxRelay, outboxTableSql, outboxRequestIdSql, outboxTraceSql, domainEvent, enqueue } = r("@platform/bus");
const { STREAMS } = r("@platform/contracts");
(async () => {
  const env = await createTestEnvironment("relb");
  const log = createLogger("relb", "silent");
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "relb", log });
  await bus.ensureStreams([STREAMS.events]);
  await ensureDatabase(env.databaseUrl);
  const ds = createDataSource({ url: env.databaseUrl, schema: "relb", entities: [], migrations: [] });
  await ds.initialize();
  try {
    await ds.query(`CREATE SCHEMA relb`);
    for (const sql of [...outboxTableSql("relb").up, ...outboxRequestIdSql("relb").up, ...outboxTraceSql("relb").up]) await ds.query(sql);
    for (let i = 0; i < ROWS; i += 500) {
      const evts = Array.from({ length: 500 }, (_, j) => ({ ...domainEvent("message.delivered", "org_0123456789abcdef", { messageId: `msg_${i + j}`, conversationId: "conv_x", contactId: "ct_x", channelId: "ch_x", providerMessageId: `wamid.${i + j}`, status: "delivered" }), requestId: `req_${i}`, traceparent: null }));
      await ds.transaction((m) => enqueue(m, "relb", evts));
    }
    const relay = new OutboxRelay({ databaseUrl: env.databaseUrl, schema: "relb", bus, log, batchSize: BATCH, coalesceMs: 0 });
    const c0 = process.cpuUsage(), t0 = Date.now();
    relay.start();
    while (relay.published < ROWS) await new Promise((res) => setTimeout(res, 20));
    const c = process.cpuUsage(c0), t1 = Date.now();
    await relay.stop();
    console.log(`${wt}: ${ROWS} rows, batches of ${BATCH}: relay process CPU ${(((c.user + c.system) / ROWS)).toFixed(1)} µs per row (user ${(c.user / ROWS).toFixed(1)}), wall ${((t1 - t0) / ROWS * 1000).toFixed(0)} µs; load ${require("os").loadavg()[0].toFixed(1)}`);
  } finally {
    await ds.destroy();
    await bus.close();
    await env.cleanup();
  }
})().catch((e) => { console.error(e); process.exit(1); });
