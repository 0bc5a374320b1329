/**
 * `npm run bench -- contacts`: keyset pagination at depth and the batch
 * opt-out check, against a real contacts service, Postgres and NATS.
 *
 * Targets (issue): a page at depth 100,000 of a 1,000,000-contact
 * organization answers within 2x the time of the first page; an opt-out
 * batch check of 50,000 numbers answers in under 500 ms.
 */
import { Bus } from "@platform/bus";
import { RPC } from "@platform/contracts";
import { contactCursorCodec, definition } from "@platform/contacts";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startService } from "@platform/service";
import { createTestEnvironment } from "@platform/testing";

const CONTACTS = 1_000_000;
const DEPTHS = [100_000, 900_000];
const PAGE_RUNS = 300;
const CHECK_PHONES = 50_000;
const CHECK_RUNS = 20;

function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { p50: at(0.5), p95: at(0.95), max: s[s.length - 1], mean: s.reduce((a, b) => a + b, 0) / s.length };
}
const ms = (n: number) => n.toFixed(2);

export async function run(): Promise<string> {
  const env = await createTestEnvironment("benchcontacts");
  const svc = await startService(
    definition,
    env.serviceEnv(),
    { exitOnConfigError: false },
  );
  const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "bench-contacts", log: createLogger("bench", "silent") });
  try {
    const db = svc.deps.db;
    const org = newId("organization");
    const seedStart = Date.now();
    // 1,000,000 contacts, ten per millisecond (so createdAt ties are exercised), inserted set-wise.
    for (let start = 0; start < CONTACTS; start += 250_000) {
      await db.query(
        `INSERT INTO contacts.contacts (id, organization_id, phone, created_at, updated_at)
         SELECT 'ct_' || lpad(g::text, 10, '0'), $1, '+1' || (2000000000 + g)::text,
                timestamptz '2026-01-01T00:00:00Z' + (g / 10) * interval '1 millisecond',
                timestamptz '2026-01-01T00:00:00Z' + (g / 10) * interval '1 millisecond'
         FROM generate_series($2::int, $2::int + 249999) g`,
        [org, start],
      );
    }
    // Noise: another organization's contacts in the same table.
    await db.query(
      `INSERT INTO contacts.contacts (id, organization_id, phone)
       SELECT 'ct_x' || lpad(g::text, 9, '0'), $1, '+1' || (3000000000 + g)::text FROM generate_series(1, 100000) g`,
      [newId("organization")],
    );
    await db.query(`ANALYZE contacts.contacts`);
    const seedMs = Date.now() - seedStart;

    const codec = contactCursorCodec(env.internalToken);
    const cursorAt = async (depth: number) => {
      const [row] = await db.query(
        `SELECT id, created_at FROM contacts.contacts WHERE organization_id = $1 ORDER BY created_at, id OFFSET $2 LIMIT 1`,
        [org, depth - 1],
      );
      return codec.encode({ o: org, t: (row.created_at as Date).toISOString(), i: row.id });
    };
    const headers = { "x-internal-token": env.internalToken, "x-organization-id": org };
    const page = async (cursor?: string, limit = 25) => {
      const qs = new URLSearchParams({ limit: String(limit), ...(cursor ? { cursor } : {}) });
      const t0 = performance.now();
      const res = await fetch(`${svc.url}/api/v1/contacts?${qs}`, { headers });
      const body = (await res.json()) as { items: unknown[] };
      const t = performance.now() - t0;
      if (res.status !== 200 || body.items.length !== limit) throw new Error(`page failed: ${res.status}`);
      return t;
    };
    const measure = async (cursor?: string, limit = 25) => {
      for (let i = 0; i < 20; i++) await page(cursor, limit); // warm-up
      const samples: number[] = [];
      for (let i = 0; i < PAGE_RUNS; i++) samples.push(await page(cursor, limit));
      return stats(samples);
    };

    const pageRows: string[] = [];
    const ratios: string[] = [];
    for (const limit of [25, 100]) {
      const first = await measure(undefined, limit);
      pageRows.push(`| first page | ${limit} | ${ms(first.p50)} | ${ms(first.p95)} | ${ms(first.max)} | 1.00 |`);
      for (const depth of DEPTHS) {
        const deep = await measure(await cursorAt(depth), limit);
        const ratio = deep.p50 / first.p50;
        pageRows.push(`| depth ${depth.toLocaleString("en-US")} | ${limit} | ${ms(deep.p50)} | ${ms(deep.p95)} | ${ms(deep.max)} | ${ratio.toFixed(2)} |`);
        if (depth === 100_000) ratios.push(`limit ${limit}: ${ratio.toFixed(2)}x`);
      }
    }
    const [plan] = await db.query(
      `EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM contacts.contacts c
       WHERE c.organization_id = $1 AND (c.created_at, c.id) > ($2::timestamptz, $3::text) ORDER BY c.created_at, c.id LIMIT 26`,
      [org, "2026-01-01T00:00:10.000Z", "ct_0000100000"],
    );
    const planNode = plan["QUERY PLAN"][0].Plan.Plans?.[0]?.["Node Type"] ?? plan["QUERY PLAN"][0].Plan["Node Type"];

    // Opt-out batch check: 50,000 numbers on a channel whose organization has 250,000 opt-out records over 5 channels.
    const channels = Array.from({ length: 5 }, () => newId("channel"));
    for (const [i, ch] of channels.entries()) {
      await db.query(
        `INSERT INTO contacts.opt_outs (id, organization_id, messaging_channel_id, phone, active, source, revoked_at)
         SELECT 'opt_' || $3::text || '_' || g, $1, $2, '+1' || (2000000000 + g * 4 + $3::int)::text, g % 10 <> 0, 'api',
                CASE WHEN g % 10 = 0 THEN now() END
         FROM generate_series(0, 49999) g`,
        [org, ch, i],
      );
    }
    await db.query(`ANALYZE contacts.opt_outs`);
    const phones = Array.from({ length: CHECK_PHONES }, (_, g) => `+1${2000000000 + g * 4}`);
    const expected = (await bus.request(RPC.checkOptOuts, { organizationId: org, messagingChannelId: channels[0], phones }, { timeoutMs: 30_000 })).optedOut.length;
    const checkSamples: number[] = [];
    for (let i = 0; i < CHECK_RUNS; i++) {
      const t0 = performance.now();
      const answer = await bus.request(RPC.checkOptOuts, { organizationId: org, messagingChannelId: channels[0], phones }, { timeoutMs: 30_000 });
      checkSamples.push(performance.now() - t0);
      if (answer.optedOut.length !== expected) throw new Error("check answer changed");
    }
    const check = stats(checkSamples);
    const payloadKb = Buffer.byteLength(JSON.stringify({ organizationId: org, messagingChannelId: channels[0], phones })) / 1024;

    return [
      "## contacts",
      "",
      `Setup: ${CONTACTS.toLocaleString("en-US")} contacts in one organization (+100,000 in another), seeded in ${(seedMs / 1000).toFixed(1)} s; ` +
        `${PAGE_RUNS} sequential GET /api/v1/contacts per row after 20 warm-up calls, straight to the service (no gateway). Times in ms.`,
      "",
      "| page | limit | p50 | p95 | max | p50 / first page |",
      "|---|---|---|---|---|---|",
      ...pageRows,
      "",
      `Target: depth 100,000 within 2x the first page — measured ${ratios.join(", ")}. Plan of the page query: \`${planNode}\` on (organization_id, created_at, id).`,
      "",
      `Opt-out batch check (RPC ${RPC.checkOptOuts.subject}): ${CHECK_PHONES.toLocaleString("en-US")} numbers (${payloadKb.toFixed(0)} KB request), ` +
        `250,000 opt-out records in the organization, ${expected.toLocaleString("en-US")} opted out on the channel; ${CHECK_RUNS} runs: ` +
        `p50 ${ms(check.p50)} ms, p95 ${ms(check.p95)} ms, max ${ms(check.max)} ms (target < 500 ms).`,
      "",
    ].join("\n");
  } finally {
    await bus.close();
    await svc.stop();
    await env.cleanup();
  }
}

if (require.main === module) {
  run()
    .then((md) => {
      process.stdout.write(md + "\n");
      process.exit(0);
    })
    .catch((err) => {
      process.stderr.write(`${(err as Error).stack}\n`);
      process.exit(1);
    });
}
