/**
 * `npm run bench -- template-yield`: single sends (`POST /api/v1/messages`, a
 * customer's reply) on a channel while template batches
 * (`rpc.messaging.template.send.v1`, as template-jobs sends them) keep that
 * channel at its full rate. Real messaging and contacts processes, Postgres,
 * NATS and the provider simulator.
 *
 * Target (brief): single send p99 under 100 ms while the bulk job runs at full
 * speed; the channel never above messagesPerSecond in any second.
 *
 * Phase 1: single sends alone (baseline). Phase 2: the same single sends while
 * BENCH_BULK_LOOPS (3) loops send batches of `rate / 5` template sends back to
 * back. Single sends go straight to messaging (no gateway), one at a time,
 * every 50 ms. BENCH_RATE (500) is the channel's messagesPerSecond.
 */
import { createHash } from "node:crypto";
import { MESSAGING_RPC, SUBJECTS } from "@platform/contracts";
import { newId } from "@platform/id";
import { cpuReport, cpuSeconds, startMessagingBench } from "./lib";

const RATE = Number(process.env.BENCH_RATE ?? 500);
const BULK_LOOPS = Number(process.env.BENCH_BULK_LOOPS ?? 3);
const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 15);
const SINGLE_RECIPIENTS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN);

export async function run(): Promise<string> {
  const { env, sim, contacts, messaging, bus, db, url, org, headers, channel, stop: teardown } = await startMessagingBench("benchyield", RATE);
  try {
    // Open the single-send recipients' windows the way production does.
    const phones = Array.from({ length: SINGLE_RECIPIENTS }, (_, i) => `+1628${String(3_000_000 + i).padStart(7, "0")}`);
    const body = JSON.stringify({
      object: "whatsapp_business_account",
      entry: [{ id: "waba", changes: [{ field: "messages", value: {
        metadata: { phone_number_id: channel.providerPhoneNumberId },
        messages: phones.map((p, i) => ({ from: p.slice(1), id: `wamid.yield.${i}.${env.namespace}`, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "hi" } })),
      } }] }],
    });
    await bus.publish(SUBJECTS.providerInbound.subject, { body, receivedAt: new Date().toISOString() }, { msgId: createHash("sha256").update(body).digest("hex") });
    for (const started = Date.now(); ; ) {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM messaging.service_windows`);
      if (rows[0].n >= SINGLE_RECIPIENTS) break;
      if (Date.now() - started > 60_000) throw new Error("service windows not opened");
      await sleep(100);
    }

    async function singles(seconds: number): Promise<{ latencies: number[]; failures: number }> {
      const latencies: number[] = [];
      let failures = 0;
      const end = Date.now() + seconds * 1000;
      for (let i = 0; Date.now() < end; i++) {
        const t0 = performance.now();
        const res = await fetch(`${url}/api/v1/messages`, {
          method: "POST",
          headers,
          body: JSON.stringify({ to: phones[i % phones.length], text: `reply ${i}`, messagingChannelId: channel.id }),
        });
        const answer = (await res.json()) as { providerMessageId?: string | null };
        latencies.push(performance.now() - t0);
        if (res.status !== 200 || !answer.providerMessageId) failures++;
        await sleep(50);
      }
      return { latencies: latencies.sort((a, b) => a - b), failures };
    }

    // Warm-up, then the baseline.
    await singles(2);
    const baseline = await singles(PHASE_S);

    let stop = false;
    let seq = 0;
    const outcomes: Record<string, number> = {};
    let bulkErrors = 0;
    const batchSize = Math.max(1, Math.floor(RATE / 5));
    const jobId = newId("job");
    const bulkLoop = async () => {
      while (!stop) {
        const sends = Array.from({ length: batchSize }, () => {
          const i = seq++;
          return { key: `job:${jobId}:${i}`, phone: `+1629${String(1_000_000 + i).padStart(7, "0")}`, bodyParameters: [`n${i}`] };
        });
        try {
          const r = await bus.request(
            MESSAGING_RPC.sendTemplates,
            { organizationId: org, messagingChannelId: channel.id, templateJobId: jobId, template: { name: "promo", language: "en_US" }, sends },
            { timeoutMs: 30_000 },
          );
          for (const o of r.results) outcomes[o.outcome] = (outcomes[o.outcome] ?? 0) + 1;
        } catch {
          bulkErrors++;
        }
      }
    };
    const pids = { messaging: messaging.child.pid, contacts: contacts.child.pid, "bench+simulator": process.pid };
    const simBefore = sim.requests.length;
    const bulkStart = Date.now();
    const loops = Array.from({ length: BULK_LOOPS }, () => bulkLoop());
    await sleep(1_000); // the job reaches full speed
    const cpuBefore = await cpuSeconds(pids);
    const underLoad = await singles(PHASE_S);
    const cpuAfter = await cpuSeconds(pids);
    stop = true;
    await Promise.all(loops);
    const bulkSeconds = (Date.now() - bulkStart) / 1000;

    // Provider requests of the channel during the bulk phase: the most in any sliding second.
    const times = sim.requests
      .slice(simBefore)
      .filter((r) => r.phoneNumberId === channel.providerPhoneNumberId && r.responseStatus === 200)
      .map((r) => r.receivedAt)
      .sort((a, b) => a - b);
    let maxPerSecond = 0;
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i] - times[j] >= 1000) j++;
      maxPerSecond = Math.max(maxPerSecond, i - j + 1);
    }
    const perCalendarSecond = new Map<number, number>();
    for (const t of times) perCalendarSecond.set(Math.floor(t / 1000), (perCalendarSecond.get(Math.floor(t / 1000)) ?? 0) + 1);
    const maxCalendarSecond = Math.max(0, ...perCalendarSecond.values());
    const templateSent = sim.requests.slice(simBefore).filter((r) => (r.body as { type?: string })?.type === "template" && r.responseStatus === 200).length;
    const row = (name: string, r: { latencies: number[]; failures: number }) =>
      `| ${name} | ${r.latencies.length} | ${pct(r.latencies, 50).toFixed(1)} | ${pct(r.latencies, 99).toFixed(1)} | ${r.latencies[r.latencies.length - 1].toFixed(1)} | ${r.failures} |`;
    return [
      `One channel of ${RATE} msg/s. Single sends straight to messaging, one at a time every 50 ms, ${PHASE_S} s per phase;`,
      `bulk: ${BULK_LOOPS} loops of template batches of ${batchSize} (≈ 200 ms of the channel) back to back over the bus.`,
      "",
      "| single sends | count | p50 ms | p99 ms | max ms | failures (non-200 or no provider id) |",
      "|---|---|---|---|---|---|",
      row("alone", baseline),
      row("during the bulk job", underLoad),
      "",
      `Bulk: ${templateSent} templates accepted by the provider in ${bulkSeconds.toFixed(1)} s (${Math.round(templateSent / bulkSeconds)}/s of ${RATE}/s; ` +
        `outcomes ${JSON.stringify(outcomes)}, RPC errors ${bulkErrors}). Provider requests of the channel (as the simulator received them): at most ${maxCalendarSecond} in one calendar second, ${maxPerSecond} in any sliding second (limit ${RATE}).`,
      `Target single send p99 < 100 ms during the job: ${pct(underLoad.latencies, 99) < 100 ? "met" : "NOT met"}.`,
      `- ${cpuReport(cpuBefore, cpuAfter, PHASE_S, underLoad.latencies.length)}`,
    ].join("\n");
  } finally {
    await teardown();
  }
}
