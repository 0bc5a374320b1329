/**
 * `npm run bench -- throttle-recovery`: how fast a channel sends again after
 * the provider stops answering 130429 (reported: 48 s after 10 s of 130429).
 *
 * Target (issue): sending resumes within 5 s once the provider stops answering
 * 130429, then climbs back to the full rate, never above messagesPerSecond.
 *
 * One channel of BENCH_RATE (200) msg/s kept busy by template batches
 * (`rpc.messaging.template.send.v1`, 2 loops of `rate / 5`; a loop whose batch
 * came back with pending sends waits 500 ms, as a polite requester would).
 * After 4 s the simulator answers every send with 130429 for 10 s, then
 * accepts again. Real messaging and contacts processes, Postgres, NATS.
 */
import { MESSAGING_RPC } from "@platform/contracts";
import { newId } from "@platform/id";
import { startMessagingBench } from "./lib";

const RATE = Number(process.env.BENCH_RATE ?? 200);
const LOOPS = 2;
const BEFORE_S = 4;
const THROTTLED_S = 10;
const AFTER_S = 20;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(): Promise<string> {
  const { sim, messaging, bus, db, org, channel, stop: teardown } = await startMessagingBench("benchthrottle", RATE);
  try {
    let stop = false;
    let seq = 0;
    const jobId = newId("job");
    const batchSize = Math.max(1, Math.floor(RATE / 5));
    const loop = async () => {
      while (!stop) {
        const sends = Array.from({ length: batchSize }, () => {
          const i = seq++;
          return { key: `job:${jobId}:${i}`, phone: `+1629${String(1_000_000 + i).padStart(7, "0")}` };
        });
        try {
          const r = await bus.request(
            MESSAGING_RPC.sendTemplates,
            { organizationId: org, messagingChannelId: channel.id, templateJobId: jobId, template: { name: "promo", language: "en_US" }, sends },
            { timeoutMs: 30_000 },
          );
          if (r.results.some((o) => o.outcome === "pending")) await sleep(500);
        } catch {
          await sleep(500);
        }
      }
    };
    const t0 = Date.now();
    const loops = Array.from({ length: LOOPS }, () => loop());
    await sleep(BEFORE_S * 1000);
    const throttleStart = Date.now();
    sim.setMode({ kind: "error", httpStatus: 400, code: 130429, message: "(#130429) Rate limit hit" });
    await sleep(THROTTLED_S * 1000);
    sim.setMode({ kind: "ok" });
    const throttleEnd = Date.now();
    await sleep(AFTER_S * 1000);
    stop = true;
    await Promise.all(loops);

    const accepted = sim.requests.filter((r) => r.responseStatus === 200).map((r) => r.receivedAt).sort((a, b) => a - b);
    const refused = sim.requests.filter((r) => r.responseStatus === 400).length;
    const firstAfter = accepted.find((t) => t >= throttleEnd);
    const perSecond = (from: number, seconds: number) =>
      Array.from({ length: seconds }, (_, s) => accepted.filter((t) => t >= from + s * 1000 && t < from + (s + 1) * 1000).length);
    const before = perSecond(t0 + 1000, BEFORE_S - 1);
    const after = perSecond(throttleEnd, AFTER_S);
    const fullAt = after.findIndex((n) => n >= 0.9 * RATE);
    let maxSliding = 0;
    for (let i = 0, j = 0; i < accepted.length; i++) {
      while (accepted[i] - accepted[j] >= 1000) j++;
      maxSliding = Math.max(maxSliding, i - j + 1);
    }
    const { rows } = await db.query(`SELECT status, count(*)::int AS n FROM messaging.messages GROUP BY status ORDER BY status`);
    const [pacing] = (await db.query(`SELECT rate, decreased_at FROM messaging.channel_pacing WHERE channel_id = $1`, [channel.id])).rows;
    return [
      `One channel of ${RATE} msg/s kept busy by ${LOOPS} loops of ${batchSize}-send template batches; the simulator answers 130429 to every send`,
      `for ${THROTTLED_S} s (from ${((throttleStart - t0) / 1000).toFixed(1)} s), then accepts again; ${AFTER_S} s observed after.`,
      "",
      `- accepted per second before: ${before.join(", ")}`,
      `- refused with 130429: ${refused}`,
      `- first accepted send ${firstAfter ? `${firstAfter - throttleEnd} ms` : "NEVER"} after the provider stopped answering 130429 (target < 5,000 ms: ${firstAfter && firstAfter - throttleEnd < 5_000 ? "met" : "NOT met"})`,
      `- accepted per second after: ${after.join(", ")} (≥ 90% of the rate from second ${fullAt >= 0 ? fullAt + 1 : "never"})`,
      `- most accepted in any sliding second: ${maxSliding} (limit ${RATE}); pacing row at the end: rate ${pacing.rate === null ? "full" : Number(pacing.rate).toFixed(1)}, last decrease ${pacing.decreased_at ? new Date(pacing.decreased_at).getTime() - t0 : "-"} ms into the run`,
      `- messages by status at the end: ${rows.map((r: { status: string; n: number }) => `${r.status}: ${r.n}`).join(", ")}`,
    ].join("\n");
  } finally {
    await teardown();
  }
}
