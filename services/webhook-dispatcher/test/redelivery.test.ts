import { expect } from "chai";
import type { DataSource } from "typeorm";
import { eventSubject } from "@platform/contracts";
import { openDatabase } from "@platform/db";
import { createLogger } from "@platform/logging";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { attemptIdBefore, ATTEMPT_LOG_RETENTION_MS, DeliveryRepository, type ClaimedJob, type JobCompletion } from "../src/db/repositories/delivery.repository";
import { WebhookRepository } from "../src/db/repositories/webhook.repository";
import { definition } from "../src/service";
import { Dispatcher, MAX_RETRIES } from "../src/use-cases/dispatcher";
import type { HttpSender } from "../src/use-cases/http-sender";
import { HttpSender as RealSender } from "../src/use-cases/http-sender";
import { EventIngestor } from "../src/use-cases/ingest-event";
import { eventually, jobsSettled, newId, Receiver, startStack, type Stack } from "./helpers";

/**
 * The delivery tables have no foreign keys (ADR 0012): what the keys guaranteed
 * is the code's job now. At-least-once with one job per (event, webhook) under
 * concurrent redelivery, one log entry per real attempt, the webhook's rows
 * deleted with it, rows a racing delete left behind never blocking the claim.
 */
describe("redelivery and the delivery rows without foreign keys", () => {
  let stack: Stack;
  let receiver: Receiver;

  before(async () => {
    stack = await startStack("whd_redeliver");
    // The first attempt of each event fails, so the log has two attempts per delivered event.
    receiver = await Receiver.start((r) => (receiver.byEvent(r.body?.data?.id).length === 1 ? { status: 503, body: "later" } : { status: 200, body: "ok" }));
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  it("concurrent redelivery (the bus again and again, a second replica's ingestor at once): one job, same data.id and bytes, one log entry per attempt", async () => {
    const org = newId("organization");
    const hook = (await stack.admin(org).post("", { url: receiver.url + "/r", events: ["message.received"] }).expect(201)).body as { id: string };
    const eventId = newId("event");
    const event = { event: "message.received" as const, timestamp: new Date().toISOString(), organizationId: org, data: { id: eventId, messageId: newId("message") } };

    // A second replica of the dispatcher on the same database: its own ingestor, dispatcher and sender.
    const ds = stack.svc.deps.db;
    const repo2 = new DeliveryRepository(ds);
    const sender2 = new RealSender({ timeoutMs: 1_000, allowPrivate: true });
    const dispatcher2 = new Dispatcher({ repo: repo2, sender: sender2, log: createLogger("replica2", "silent"), retryDelaysMs: [150, 150, 150], timeoutMs: 1_000 });
    dispatcher2.start();
    const ingestor2 = new EventIngestor(repo2, dispatcher2, createLogger("replica2", "silent"));
    try {
      // The same event published 4 times (JetStream dedup defeated: distinct msgIds, as a publisher retry after its
      // own crash would), and ingested by the other replica at the same moment.
      await Promise.all([
        ...[1, 2, 3, 4].map((n) => stack.bus.publish(eventSubject("message.received"), event, { msgId: `${eventId}-${n}` })),
        ingestor2.ingest(event as never),
        ingestor2.ingest(event as never),
      ]);
      await eventually(() => receiver.byEvent(eventId).length >= 2, 10_000);
      await jobsSettled(stack, hook.id);
    } finally {
      await dispatcher2.stop();
    }
    const stored = await ds.query(`SELECT count(*)::int AS n FROM webhooks.events WHERE id = $1`, [eventId]);
    expect(stored[0].n).to.equal(1);
    const reqs = receiver.byEvent(eventId);
    // One job: its first attempt failed (503), the retry succeeded; no second job delivered the event again.
    expect(reqs.map((r) => r.body.data.id)).to.deep.equal([eventId, eventId]);
    expect(new Set(reqs.map((r) => r.raw.toString("base64"))).size).to.equal(1);
    const items = (await stack.admin(org).get(`/${hook.id}/deliveries?limit=100`).expect(200)).body.items as Array<{ id: string; eventId: string; attempt: number; responseStatus: number }>;
    expect(items.map((i) => i.attempt)).to.deep.equal([2, 1]);
    expect(items.map((i) => i.responseStatus)).to.deep.equal([200, 503]);
    expect(items.every((i) => i.eventId === eventId)).to.equal(true);
    expect(items.map((i) => i.id)).to.deep.equal(reqs.map((r) => r.headers["x-service-delivery"]).reverse());
  });
});

describe("delivery rows without foreign keys (repository)", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  let ds2: DataSource;
  let repo: DeliveryRepository;
  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("whnofk");
    ds = await openDatabase({ url: env.databaseUrl, schema: "webhooks", entities: definition.entities, migrations: definition.migrations, poolSize: 4 });
    ds2 = await openDatabase({ url: env.databaseUrl, schema: "webhooks", entities: definition.entities, migrations: [], poolSize: 4 });
    repo = new DeliveryRepository(ds);
  });
  after(async () => {
    await ds2?.destroy();
    await ds?.destroy();
    await env?.cleanup();
  });

  const noLease = { busy: new Map<string, number>(), capacity: 0, leaseMs: 60_000 };

  it("the same events ingested concurrently by two replicas, many times: one event row and one job per (event, webhook)", async () => {
    await ds.query(
      `INSERT INTO webhooks.webhooks (id, organization_id, url, events, secret, created_at)
       VALUES ('wh_a', 'org_r', 'http://a', '{message.received}', 's', now() - interval '1 minute'),
              ('wh_b', 'org_r', 'http://b', '{message.received}', 's', now() - interval '1 minute')`,
    );
    const events = Array.from({ length: 20 }, (_, n) => ({ id: `evr_${n}`, organizationId: "org_r", event: "message.received", body: `{"n":${n}}`, occurredAt: new Date().toISOString() }));
    const repo2 = new DeliveryRepository(ds2);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, n) => (n % 2 ? repo2 : repo).ingest(events, noLease)),
    );
    // Every (event, webhook) job was created by exactly one of the racing statements.
    const created = results.flat().map((j) => `${j.eventId}/${j.webhookId}`);
    expect(created).to.have.length(40);
    expect(new Set(created).size).to.equal(40);
    const rows = await ds.query(`SELECT count(*)::int AS jobs, count(DISTINCT (event_id, webhook_id))::int AS pairs FROM webhooks.delivery_jobs WHERE organization_id = 'org_r'`);
    expect(rows[0]).to.deep.equal({ jobs: 40, pairs: 40 });
    const stored = await ds.query(`SELECT count(*)::int AS n FROM webhooks.events WHERE organization_id = 'org_r'`);
    expect(stored[0].n).to.equal(20);
  });

  it("jobs left by a racing delete never fill the claim's candidates, and pruning removes them", async () => {
    await ds.query(`INSERT INTO webhooks.webhooks (id, organization_id, url, events, secret) VALUES ('wh_live', 'org_o', 'http://l', '{message.received}', 's')`);
    await ds.query(`INSERT INTO webhooks.events (id, organization_id, event, body) VALUES ('evo_live', 'org_o', 'message.received', '{}')`);
    // 600 due jobs of a webhook that no longer exists, all due before the live one (more than the candidates' 500).
    await ds.query(
      `INSERT INTO webhooks.delivery_jobs (event_id, webhook_id, organization_id, due_at)
       SELECT 'evo_gone_' || n, 'wh_gone', 'org_o', now() - interval '1 hour' FROM generate_series(1, 600) n`,
    );
    await ds.query(`INSERT INTO webhooks.delivery_jobs (event_id, webhook_id, organization_id, due_at) VALUES ('evo_live', 'wh_live', 'org_o', now() - interval '1 minute')`);
    const claimed = await repo.claim({ limit: 10, perWebhook: 8, busy: new Map(), leaseMs: 60_000 });
    expect(claimed.map((j) => `${j.eventId}/${j.webhookId}`)).to.include("evo_live/wh_live");
    expect(claimed.every((j) => j.webhookId !== "wh_gone")).to.equal(true);
    await repo.prune();
    const left = await ds.query(`SELECT count(*)::int AS n FROM webhooks.delivery_jobs WHERE webhook_id = 'wh_gone'`);
    expect(left[0].n).to.equal(0);
    const live = await ds.query(`SELECT count(*)::int AS n FROM webhooks.delivery_jobs WHERE webhook_id = 'wh_live'`);
    expect(live[0].n).to.equal(1);
  });

  it("retention deletes attempts started over 30 days ago by id (no created_at index): the bound sorts between the ids before and after it", async () => {
    const before = newId("delivery");
    await eventually(() => Date.now() > decodeTimeOf(before) + 2, 1_000, 1);
    const bound = attemptIdBefore(new Date());
    await eventually(() => Date.now() > decodeTimeOf(bound) + 2, 1_000, 1);
    const after = newId("delivery");
    expect(bound).to.match(/^dlv_[0-9a-hjkmnp-tv-z]{26}$/);
    expect(attemptIdBefore(new Date(0))).to.equal(`dlv_${"0".repeat(26)}`);
    // Compared as Postgres compares the primary key's ids (the log's pagination relies on the same order).
    const [order] = await ds.query(`SELECT $1::text < $2::text AS lower, $2::text < $3::text AS upper`, [before, bound, after]);
    expect(order).to.deep.equal({ lower: true, upper: true });
    // An attempt id issued 30 days and a minute ago, and one issued 30 days less a minute ago.
    const old = attemptIdBefore(new Date(Date.now() - ATTEMPT_LOG_RETENTION_MS - 60_000)).slice(0, 14) + "zzzzzzzzzzzzzzzz";
    const young = attemptIdBefore(new Date(Date.now() - ATTEMPT_LOG_RETENTION_MS + 60_000));
    await ds.query(
      `INSERT INTO webhooks.delivery_attempts (id, webhook_id, organization_id, event_id, event, attempt)
       VALUES ($1, 'wh_ret', 'org_ret', 'ev_old', 'message.received', 1), ($2, 'wh_ret', 'org_ret', 'ev_young', 'message.received', 1)`,
      [old, young],
    );
    await repo.prune();
    const left: Array<{ event_id: string }> = await ds.query(`SELECT event_id FROM webhooks.delivery_attempts WHERE webhook_id = 'wh_ret'`);
    expect(left.map((r) => r.event_id)).to.deep.equal(["ev_young"]);
  });

  it("deleting a webhook deletes its jobs and its attempt log (was ON DELETE CASCADE), nobody else's", async () => {
    await ds.query(
      `INSERT INTO webhooks.webhooks (id, organization_id, url, events, secret)
       VALUES ('wh_del', 'org_d', 'http://d', '{message.received}', 's'), ('wh_keep', 'org_d', 'http://k', '{message.received}', 's')`,
    );
    for (const wh of ["wh_del", "wh_keep"]) {
      await ds.query(`INSERT INTO webhooks.delivery_jobs (event_id, webhook_id, organization_id) SELECT 'evd_' || n, $1, 'org_d' FROM generate_series(1, 3) n`, [wh]);
      await ds.query(
        `INSERT INTO webhooks.delivery_attempts (id, webhook_id, organization_id, event_id, event, attempt)
         SELECT $1 || '_dl_' || n, $1, 'org_d', 'evd_' || n, 'message.received', 1 FROM generate_series(1, 3) n`,
        [wh],
      );
    }
    const webhooks = new WebhookRepository(ds);
    expect(await webhooks.delete("org_other", "wh_del")).to.equal(false);
    expect(await webhooks.delete("org_d", "wh_del")).to.equal(true);
    const count = async (table: string, wh: string) => (await ds.query(`SELECT count(*)::int AS n FROM webhooks.${table} WHERE webhook_id = $1`, [wh]))[0].n;
    expect([await count("delivery_jobs", "wh_del"), await count("delivery_attempts", "wh_del")]).to.deep.equal([0, 0]);
    expect([await count("delivery_jobs", "wh_keep"), await count("delivery_attempts", "wh_keep")]).to.deep.equal([3, 3]);
  });
});

describe("unit: the retry schedule", () => {
  it("retry n waits the n-th configured delay; the attempt after the 3rd retry is the last (1 + 3 attempts)", async () => {
    const completions: JobCompletion[] = [];
    const repo = {
      async claim() {
        return [];
      },
      async complete(batch: JobCompletion[]) {
        completions.push(...batch);
        return [];
      },
      async release() {},
      async beat() {},
      async freeDeadLeases() {
        return 0;
      },
      async leave() {},
    } as unknown as DeliveryRepository;
    const sender = {
      async send() {
        return { ok: false, status: 500, body: "no", error: "HTTP 500", durationMs: 1 };
      },
      async close() {},
    } as unknown as HttpSender;
    const delays = [5_000, 300_000, 1_800_000];
    const dispatcher = new Dispatcher({ repo, sender, log: createLogger("retry-test", "silent"), retryDelaysMs: delays, timeoutMs: 1_000, pollMs: 60_000 });
    dispatcher.start();
    const job = (attempt: number): ClaimedJob => ({
      jobId: String(attempt),
      eventId: "evt",
      webhookId: "wh",
      organizationId: "org",
      attempt,
      url: "http://x",
      secret: "s",
      event: "message.received",
      body: "{}",
    });
    dispatcher.adopt([1, 2, 3, 4].map(job), false);
    await eventually(() => completions.length === 4, 5_000);
    await dispatcher.stop();
    const byAttempt = completions.sort((a, b) => a.record.attempt - b.record.attempt).map((c) => [c.record.attempt, c.retryInMs]);
    expect(MAX_RETRIES).to.equal(3);
    expect(byAttempt).to.deep.equal([
      [1, 5_000],
      [2, 300_000],
      [3, 1_800_000],
      [4, null],
    ]);
  });
});

/** The millisecond time of a `dlv_` id (the ULID's first 10 base-32 digits). */
function decodeTimeOf(id: string): number {
  const alphabet = "0123456789abcdefghjkmnpqrstvwxyz";
  return [...id.slice(4, 14)].reduce((ms, c) => ms * 32 + alphabet.indexOf(c), 0);
}
