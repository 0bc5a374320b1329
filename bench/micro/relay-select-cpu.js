// Node-side and backend CPU of the relay's SELECT per row (batches of 20), to size handing rows over in memory.
// usage: node bench/micro/relay-select-cpu.js <worktree> (after the worktree is built)
const wt = process.argv[2];
const fs = require("fs");
const r = (p) => require(require.resolve(p, { paths: [`${wt}/services/messaging`] }));
require(require.resolve("reflect-metadata", { paths: [`${wt}/services/messaging`] }));
const { createTestEnvironment } = r("@platform/testing");
const { createDataSource, ensureDatabase } = r("@platform/db");
const { outboxTableSql, outboxRequestIdSql, outboxTraceSql, domainEvent, enqueue } = r("@platform/bus");
const { Client } = r("pg");
const cpu = (pid) => { const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return (Number(f[11]) + Number(f[12])) * 10; };
(async () => {
  const env = await createTestEnvironment("selb");
  await ensureDatabase(env.databaseUrl);
  const ds = createDataSource({ url: env.databaseUrl, schema: "selb", entities: [], migrations: [] });
  await ds.initialize();
  const c = new Client({ connectionString: env.databaseUrl });
  await c.connect();
  try {
    await ds.query(`CREATE SCHEMA selb`);
    for (const sql of [...outboxTableSql("selb").up, ...outboxRequestIdSql("selb").up, ...outboxTraceSql("selb").up]) await ds.query(sql);
    const evts = Array.from({ length: 20 }, (_, j) => ({ ...domainEvent("message.delivered", "org_0123456789abcdef", { messageId: `msg_${j}`, conversationId: "conv_x", contactId: "ct_x", channelId: "ch_x", providerMessageId: `wamid.${j}`, status: "delivered" }), requestId: `req_${j}`, traceparent: null }));
    await ds.transaction((m) => enqueue(m, "selb", evts));
    const [{ pid }] = (await c.query(`SELECT pg_backend_pid() AS pid`)).rows;
    const N = 5000;
    const q = { name: "s", text: `SELECT id, msg_id, subject, payload, request_id, traceparent FROM selb.outbox ORDER BY id LIMIT $1`, values: [20] };
    for (let i = 0; i < 200; i++) await c.query(q);
    const b0 = cpu(pid), n0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await c.query(q);
    const n = process.cpuUsage(n0), b1 = cpu(pid);
    console.log(`SELECT of 20 rows: node ${((n.user + n.system) / N).toFixed(1)} µs, backend ${((b1 - b0) * 1000 / N).toFixed(1)} µs per statement (${((n.user + n.system) / N / 20).toFixed(1)} + ${((b1 - b0) * 1000 / N / 20).toFixed(1)} µs per row); load ${require("os").loadavg()[0].toFixed(1)}`);
  } finally {
    await c.end();
    await ds.destroy();
    await env.cleanup();
  }
})().catch((e) => { console.error(e); process.exit(1); });
