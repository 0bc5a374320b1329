/**
 * `npm run bench -- analytics`: GET /api/v1/analytics at volume, the naive
 * GROUP BY beside it, and the ingestion rate and lag of the consumer.
 *
 * Targets (issue 11): with 10,000,000 outbound messages over a year for one
 * organization, loaded in bulk through the service's own ingestion statement
 * (analytics.apply_message_statuses, the one the consumer runs per batch),
 * a day, a month and the year answer with p99 < 20 ms each and the year no
 * more than 1.5x the day; the naive `GROUP BY status` over a plain indexed
 * messages table of the same rows, side by side (target >= 100x); the
 * consumer's ingestion rate from JetStream (>= 5,000 events/s) and the
 * event → answer lag (< 1 s).
 *
 * BENCH_ANALYTICS_MESSAGES (default 10,000,000) and BENCH_ANALYTICS_EVENTS
 * (default 150,000) scale it down for a quick run.
 */
import path from "node:path";
import { Client } from "pg";
import { Bus, domainEvent } from "@platform/bus";
import { STREAMS } from "@platform/contracts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { createTestEnvironment } from "@platform/testing";
import { cpuReport, cpuSeconds, rssMb, startChild, stopChild } from "./lib";

const MESSAGES = Number(process.env.BENCH_ANALYTICS_MESSAGES ?? 10_000_000);
const EVENTS = Number(process.env.BENCH_ANALYTICS_EVENTS ?? 150_000);
const CHUNK = 200_000;
const RUNS = 500;
const NAIVE_RUNS = 5;
const YEAR_START = Date.parse("2025-01-01T00:00:00.000Z");
const YEAR_MS = 365 * 86_400_000;

function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { p50: at(0.5), p99: at(0.99), max: s[s.length - 1]!, mean: s.reduce((a, b) => a + b, 0) / s.length };
}
const f = (n: number) => n.toFixed(2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchanalytics");
  const root = path.resolve(__dirname, "../..");
  const serviceEnv = { ...process.env, ...env.serviceEnv({ LOG_LEVEL: "info" }) };
  const script = path.join(root, "services/analytics/dist/index.js");
  let svc = await startChild(script, [], serviceEnv, /listening/);
  const pg = new Client({ connectionString: env.databaseUrl });
  await pg.connect();
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bench-analytics", log: createLogger("bench", "silent") });
  const org = newId("organization");
  const out: string[] = [];
  try {
    // ---- bulk load through the ingestion statement ------------------------------------------------------
    // Message g: created at an even spread over 2025 (with a sub-second jitter), status by g mod 100:
    // 5% failed, 10% sent, 30% delivered, 55% read.
    const loadStart = Date.now();
    for (let a = 0; a < MESSAGES; a += CHUNK) {
      const b = Math.min(MESSAGES, a + CHUNK) - 1;
      await pg.query(
        `SELECT analytics.apply_message_statuses(array_agg(org), array_agg(id), array_agg(created), array_agg(status), array_agg(rank))
         FROM (
           SELECT $1::text AS org, 'msg_b' || lpad(g::text, 9, '0') AS id,
                  timestamptz '2025-01-01T00:00:00Z' + ((g::bigint * $4::bigint) / $5::bigint + (g::bigint * 7919) % 997) * interval '1 millisecond' AS created,
                  s.status, s.rank
           FROM generate_series($2::int, $3::int) g
           CROSS JOIN LATERAL (SELECT CASE WHEN g % 100 < 5 THEN 'failed' WHEN g % 100 < 15 THEN 'sent' WHEN g % 100 < 45 THEN 'delivered' ELSE 'read' END AS status) s0
           CROSS JOIN LATERAL (SELECT s0.status, (CASE s0.status WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 ELSE 3 END)::smallint AS rank) s
         ) x`,
        [org, a, b, YEAR_MS - 1_000, MESSAGES],
      );
      if ((a / CHUNK) % 10 === 9) process.stderr.write(`[analytics] loaded ${(b + 1).toLocaleString("en-US")} in ${((Date.now() - loadStart) / 1000).toFixed(0)} s\n`);
    }
    // Noise: another organization's 100,000 messages over the same year.
    await pg.query(
      `SELECT analytics.apply_message_statuses(array_agg($1::text), array_agg('msg_n' || g), array_agg(timestamptz '2025-01-01T00:00:00Z' + g * interval '315 second'),
              array_agg('read'::text), array_agg(3::smallint)) FROM generate_series(1, 100000) g`,
      [newId("organization")],
    );
    const loadS = (Date.now() - loadStart) / 1000;
    await pg.query(`VACUUM ANALYZE analytics.messages`);
    await pg.query(`VACUUM ANALYZE analytics.buckets`);
    const [{ buckets }] = (await pg.query(`SELECT count(*)::int AS buckets FROM analytics.buckets WHERE organization_id = $1`, [org])).rows;

    // ---- the naive table: the same rows, plain, indexed -------------------------------------------------
    const naiveStart = Date.now();
    await pg.query(`CREATE TABLE public.naive_messages (id text PRIMARY KEY, organization_id text NOT NULL, created_at timestamptz NOT NULL, status text NOT NULL)`);
    await pg.query(`INSERT INTO public.naive_messages SELECT message_id, organization_id, created_at, status FROM analytics.messages`);
    await pg.query(`CREATE INDEX naive_messages_org_created ON public.naive_messages (organization_id, created_at)`);
    await pg.query(`VACUUM ANALYZE public.naive_messages`);
    const naiveLoadS = (Date.now() - naiveStart) / 1000;

    // ---- queries --------------------------------------------------------------------------------------
    const headers = { "x-internal-token": env.internalToken, "x-organization-id": org };
    const url = () => `http://127.0.0.1:${svc.port}`;
    const get = async (start: string, end: string, organizationId = org) => {
      const t0 = performance.now();
      const res = await fetch(`${url()}/api/v1/analytics?startDate=${encodeURIComponent(start)}&endDate=${encodeURIComponent(end)}`, {
        headers: { ...headers, "x-organization-id": organizationId },
      });
      const body = (await res.json()) as any;
      const t = performance.now() - t0;
      if (res.status !== 200) throw new Error(`analytics ${res.status}: ${JSON.stringify(body)}`);
      return { t, body };
    };
    const naive = async (start: string, end: string) => {
      const t0 = performance.now();
      const r = await pg.query(
        `SELECT status, count(*)::int AS n FROM public.naive_messages WHERE organization_id = $1 AND created_at >= $2 AND created_at <= $3 GROUP BY status`,
        [org, start, end],
      );
      return { t: performance.now() - t0, counts: Object.fromEntries(r.rows.map((x: any) => [x.status, x.n])) };
    };
    const ranges: Array<[string, string, string]> = [
      ["day (ms edges)", "2025-06-10T13:17:23.456Z", "2025-06-11T13:17:23.455Z"],
      ["day (date-only)", "2025-06-10", "2025-06-10"],
      ["month (ms edges)", "2025-06-10T13:17:23.456Z", "2025-07-10T13:17:23.455Z"],
      ["year (ms edges)", "2025-01-01T00:30:00.001Z", "2025-12-31T23:29:59.999Z"],
      ["year (date-only)", "2025-01-01", "2025-12-31"],
    ];
    const rows: string[] = [];
    const p99: Record<string, number> = {};
    const p50: Record<string, number> = {};
    const ratio: Record<string, number> = {};
    for (const [name, s, e] of ranges) {
      for (let i = 0; i < 30; i++) await get(s, e);
      const samples: number[] = [];
      let body: any;
      for (let i = 0; i < RUNS; i++) {
        const r = await get(s, e);
        samples.push(r.t);
        body = r.body;
      }
      const st = stats(samples);
      p99[name] = st.p99;
      p50[name] = st.p50;
      // The same instants (a date-only end is 23:59:59.999Z of its day).
      const { start: ps, end: pe } = body.period;
      const n = await naive(ps, pe); // warm
      const naiveSamples: number[] = [];
      for (let i = 0; i < NAIVE_RUNS; i++) naiveSamples.push((await naive(ps, pe)).t);
      const ns = stats(naiveSamples);
      ratio[name] = ns.p50 / st.p50;
      const same = ["sent", "delivered", "read", "failed"].every((k) => (n.counts[k] ?? 0) === body.outboundMessages.counts[k]);
      rows.push(
        `| ${name} | ${body.outboundMessages.total.toLocaleString("en-US")} | ${f(st.p50)} | ${f(st.p99)} | ${f(st.max)} | ${f(ns.p50)} | ${(ns.p50 / st.p50).toFixed(0)}x | ${same ? "yes" : "**NO**"} |`,
      );
    }
    out.push(
      "## analytics",
      "",
      `Setup: ${MESSAGES.toLocaleString("en-US")} outbound messages of one organization spread over 2025 (+100,000 of another), ` +
        `loaded in ${loadS.toFixed(0)} s by ${Math.ceil(MESSAGES / CHUNK)} calls of the ingestion statement (${CHUNK.toLocaleString("en-US")} messages each, ` +
        `${Math.round(MESSAGES / loadS).toLocaleString("en-US")} messages/s); ${buckets.toLocaleString("en-US")} bucket rows for the organization. ` +
        `The naive table (same rows, index on (organization_id, created_at)) built in ${naiveLoadS.toFixed(0)} s. ` +
        `${RUNS} sequential GET /api/v1/analytics per range straight to the service (its own process, no gateway) after 30 warm-up calls; ` +
        `the naive \`GROUP BY status\` run ${NAIVE_RUNS} times on a direct Postgres connection (no HTTP). Times in ms.`,
      "",
      "| range | messages | p50 | p99 | max | naive p50 | naive / analytics (p50) | same counts |",
      "|---|---|---|---|---|---|---|---|",
      ...rows,
      "",
      `- Naive / analytics over the same 10 M rows (the whole year, date-only: the naive query counts every row): ` +
        `${ratio["year (date-only)"]!.toFixed(0)}x (target >= 100x): ${ratio["year (date-only)"]! >= 100 ? "**met**" : "**not met**"}. ` +
        `Smaller ranges for comparison: day ${ratio["day (date-only)"]!.toFixed(0)}x, month ${ratio["month (ms edges)"]!.toFixed(0)}x ` +
        `(a day's naive scan reads ~1/365 of the rows, so it is itself a few ms; see ADR 0007).`,
      `- p99 < 20 ms each: ${Object.values(p99).every((x) => x < 20) ? "**met**" : "**not met**"}; ` +
        `year / day (ms edges) p50 ${(p50["year (ms edges)"]! / p50["day (ms edges)"]!).toFixed(2)}x, p99 ${(p99["year (ms edges)"]! / p99["day (ms edges)"]!).toFixed(2)}x (target <= 1.5x).`,
      "",
    );

    // ---- ingestion from JetStream -------------------------------------------------------------------
    // The service stops, a backlog of EVENTS events (sent → delivered → read chains of EVENTS/3 messages, in
    // stream order) is published, and the service starts again: spawn → everything acked.
    await stopChild(svc.child);
    const ingestOrg = newId("organization");
    const perMessage = 3;
    const msgs = Math.floor(EVENTS / perMessage);
    const publishStart = Date.now();
    const chain = ["sent", "delivered", "read"] as const;
    for (let a = 0; a < msgs; a += 500) {
      const batch = [];
      for (const s of chain) {
        for (let i = a; i < Math.min(msgs, a + 500); i++) {
          const createdAt = new Date(Date.parse("2026-02-01T00:00:00.000Z") + i * 1_000).toISOString();
          batch.push(
            domainEvent(`message.${s}`, ingestOrg, {
              messageId: `msg_i${i}`, conversationId: "conv_b", contactId: "ct_b", messagingChannelId: "ch_b", phone: "+15550001111",
              status: s, providerMessageId: `wamid.${i}`, createdAt,
            }),
          );
        }
      }
      await Promise.all(batch.map((e) => bus.publish(e.subject, e.payload, { msgId: e.msgId })));
    }
    const publishS = (Date.now() - publishStart) / 1000;
    const stream = bus.streamName(STREAMS.events);
    const lastSeq = (await bus.jsm.streams.info(stream)).state.last_seq;
    const floor0 = (await bus.jsm.consumers.info(stream, "analytics-message-events")).ack_floor.stream_seq;
    const cpuBefore = await cpuSeconds({ analytics: undefined });
    const t0 = Date.now();
    svc = await startChild(script, [], serviceEnv, /listening/);
    let tFirst = 0;
    let floorFirst = floor0;
    for (;;) {
      const info = await bus.jsm.consumers.info(stream, "analytics-message-events");
      if (!tFirst && info.ack_floor.stream_seq > floor0) {
        tFirst = Date.now();
        floorFirst = info.ack_floor.stream_seq;
      }
      if (info.ack_floor.stream_seq >= lastSeq) break;
      await sleep(10);
    }
    const ingestS = (Date.now() - t0) / 1000;
    const steadyRate = (lastSeq - floorFirst) / ((Date.now() - tFirst) / 1000);
    const cpuAfter = await cpuSeconds({ analytics: svc.child.pid });
    const check = await get("2026-02-01", "2026-12-31", ingestOrg);
    const ingestOk = check.body.outboundMessages.total === msgs && check.body.outboundMessages.counts.read === msgs;
    const rss = await rssMb(svc.child.pid);

    // ---- event → answer lag ----------------------------------------------------------------------------
    // One new message's status event at a time, then GET every 5 ms until the answer reflects it; first on an
    // idle service, then while a background publisher keeps LOAD_RATE status events per second flowing.
    const probeLag = async (samples: number, tag: string) => {
      const lagOrg = newId("organization");
      const lags: number[] = [];
      for (let i = 0; i < samples; i++) {
        const createdAt = new Date(Date.parse("2026-03-01T00:00:00.000Z") + i * 60_000).toISOString();
        const e = domainEvent("message.sent", lagOrg, {
          messageId: `msg_${tag}${i}`, conversationId: "conv_b", contactId: "ct_b", messagingChannelId: "ch_b", phone: "+15550001111",
          status: "sent", providerMessageId: `wamid.${tag}${i}`, createdAt,
        });
        const start = performance.now();
        await bus.publish(e.subject, e.payload, { msgId: e.msgId });
        for (;;) {
          if ((await get("2026-03-01", "2026-03-31", lagOrg)).body.outboundMessages.total === i + 1) break;
          await sleep(5);
        }
        lags.push(performance.now() - start);
      }
      return stats(lags);
    };
    const lag = await probeLag(100, "l");
    const LOAD_RATE = Number(process.env.BENCH_ANALYTICS_LOAD_RATE ?? 5_000);
    const loadOrg = newId("organization");
    let loadSent = 0;
    let loading = true;
    const loaderStart = Date.now();
    const loader = (async () => {
      const tickMs = 50;
      const perTick = Math.round((LOAD_RATE * tickMs) / 1000);
      let next = Date.now();
      while (loading) {
        const batch = [];
        for (let k = 0; k < perTick; k++) {
          const i = loadSent + k;
          const s = (["sent", "delivered", "read"] as const)[i % 3]!;
          const m = Math.floor(i / 3);
          batch.push(
            domainEvent(`message.${s}`, loadOrg, {
              messageId: `msg_load${m}`, conversationId: "conv_b", contactId: "ct_b", messagingChannelId: "ch_b", phone: "+15550001111",
              status: s, providerMessageId: `wamid.load${m}`, createdAt: new Date(Date.parse("2026-04-01T00:00:00.000Z") + m * 1_000).toISOString(),
            }),
          );
        }
        await Promise.all(batch.map((e) => bus.publish(e.subject, e.payload, { msgId: e.msgId })));
        loadSent += perTick;
        next += tickMs;
        await sleep(Math.max(0, next - Date.now()));
      }
    })();
    await sleep(1_000);
    const loadedLag = await probeLag(50, "u");
    loading = false;
    await loader;
    const loadRate = loadSent / ((Date.now() - loaderStart) / 1000);
    out.push(
      `Ingestion: ${EVENTS.toLocaleString("en-US")} events (${msgs.toLocaleString("en-US")} messages × sent, delivered, read) published ` +
        `while the service was down (${publishS.toFixed(1)} s), applied from JetStream in ${ingestS.toFixed(2)} s from the process's spawn ` +
        `(start-up and migrations check included) to the last ack: **${Math.round(EVENTS / ingestS).toLocaleString("en-US")} events/s** ` +
        `(target >= 5,000); from the first ack to the last: ${Math.round(steadyRate).toLocaleString("en-US")} events/s; ${ingestOk ? "every message counted once" : "**COUNTS WRONG**"}; batches of up to 1,000 events per transaction, ` +
        `into the same tables as the ${MESSAGES.toLocaleString("en-US")} messages above. ` +
        cpuReport(cpuBefore, cpuAfter, ingestS, EVENTS).replaceAll("ms/req", "ms/event") + ` Analytics RSS after: ${rss} MB.`,
      "",
      `Event → answer lag (publish of one status event → first GET /api/v1/analytics that reflects it, polled every 5 ms; ` +
        `100 samples, idle service): p50 ${f(lag.p50)} ms, p99 ${f(lag.p99)} ms, max ${f(lag.max)} ms (target < 1 s). ` +
        `While ${Math.round(loadRate).toLocaleString("en-US")} status events/s of another organization flow (50 samples): ` +
        `p50 ${f(loadedLag.p50)} ms, p99 ${f(loadedLag.p99)} ms, max ${f(loadedLag.max)} ms.`,
      "",
    );
    return out.join("\n");
  } finally {
    await stopChild(svc.child).catch(() => undefined);
    await bus.close();
    await pg.end();
    await env.cleanup();
  }
}
