// CPU of Postgres's backend per status change: sent → delivered → read through messaging's own status statement.
// usage: node bench/micro/status-update-cpu.js <worktree> [rows] [batch]
const wt = process.argv[2];
const ROWS = Number(process.argv[3] ?? 20000);
const BATCH = Number(process.argv[4] ?? 10);
const fs = require("fs");
const r = (p) => require(require.resolve(p, { paths: [`${wt}/services/messaging`] }));
require(require.resolve("reflect-metadata", { paths: [`${wt}/services/messaging`] }));
const { createTestEnvironment } = r("@platform/testing");
const { openDatabase } = r("@platform/db");
const { definition } = require(`${wt}/services/messaging/dist/service`);
const { messagesRepository } = require(`${wt}/services/messaging/dist/db/repositories/messages.repository`);
const cpu = (pid) => { const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return (Number(f[11]) + Number(f[12])) * 10; };
(async () => {
  const env = await createTestEnvironment("hotb");
  const ds = await openDatabase({ url: env.databaseUrl, schema: "messaging", entities: definition.entities, migrations: definition.migrations, poolSize: 2 });
  const qr = ds.createQueryRunner();
  await qr.connect();
  try {
    const cols = `id, organization_id, channel_id, conversation_id, contact_id, phone, direction, type, text, status, provider_message_id, attempts, created_at`;
    await ds.query(`INSERT INTO messaging.messages (${cols}) SELECT 'in' || n, 'org_0123456789abcdef', 'ch', 'conv_0123456789abcdef', 'ct_0123456789abcdef', '+15550001111', 'inbound', 'text', 'hello there, inbound text ' || n, 'received', 'wamid.in.' || n, 0, now() FROM generate_series(1, ${ROWS}) n`);
    await ds.query(`INSERT INTO messaging.messages (${cols}) SELECT 'out' || n, 'org_0123456789abcdef', 'ch', 'conv_0123456789abcdef', 'ct_0123456789abcdef', '+15550001111', 'outbound', 'text', 'hello there, outbound text ' || n, 'sent', 'wamid.out.' || n, 1, now() FROM generate_series(1, ${ROWS}) n`);
    await ds.query(`VACUUM ANALYZE messaging.messages`);
    const [{ pid }] = await qr.query(`SELECT pg_backend_pid() AS pid`);
    const out = [];
    for (const status of ["delivered", "read"]) {
      const c0 = cpu(pid), t0 = Date.now();
      for (let b = 0; b < ROWS; b += BATCH) {
        const input = [];
        for (let i = b; i < Math.min(ROWS, b + BATCH); i++) input.push({ ourId: null, providerMessageId: `wamid.out.${1 + ((i * 7919) % ROWS)}`, status, errorCode: null, errorTitle: null });
        await qr.startTransaction();
        await messagesRepository.applyStatusBatch(qr.manager, "ch", input);
        await qr.commitTransaction();
      }
      const c1 = cpu(pid), t1 = Date.now();
      out.push(`${status}: backend CPU ${((c1 - c0) / ROWS * 1000).toFixed(1)} µs per status, wall ${((t1 - t0) / ROWS * 1000).toFixed(0)} µs`);
    }
    await new Promise((res) => setTimeout(res, 1200));
    const [st] = await ds.query(`SELECT n_tup_upd, n_tup_hot_upd, pg_relation_size('messaging.messages') AS heap, (SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = 'messaging.messages'::regclass) AS idx FROM pg_stat_user_tables WHERE relname = 'messages'`);
    console.log(`${wt}: ${out.join("; ")}; upd ${st.n_tup_upd} hot ${st.n_tup_hot_upd}; heap ${(st.heap / 1e6).toFixed(1)} MB, indexes ${(st.idx / 1e6).toFixed(1)} MB; load ${require("os").loadavg()[0].toFixed(1)}`);
  } finally {
    await qr.release();
    await ds.destroy();
    await env.cleanup();
  }
})().catch((e) => { console.error(e); process.exit(1); });
