import { expect } from "chai";
import type { DataSource } from "typeorm";
import { openDatabase } from "@platform/db";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";
import { DeliveryRepository, type JobCompletion } from "../src/db/repositories/delivery.repository";
import { definition } from "../src/service";

/**
 * A batch of finished attempts is recorded in one statement: attempt log,
 * finished jobs, retries and failure counts. The rules of the five-statement
 * transaction it replaced still hold, including a retry of a webhook the same
 * batch deactivates (dropped with the webhook's other jobs, not rescheduled).
 */
describe("recording finished attempts", () => {
  let env: TestEnvironment;
  let ds: DataSource;
  let repo: DeliveryRepository;
  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("whcomplete");
    ds = await openDatabase({ url: env.databaseUrl, schema: "webhooks", entities: definition.entities, migrations: definition.migrations, poolSize: 2 });
    repo = new DeliveryRepository(ds);
  });
  after(async () => {
    await ds?.destroy();
    await env?.cleanup();
  });

  const completion = (jobId: string, webhookId: string, ok: boolean, retryInMs: number | null, n: number): JobCompletion => ({
    jobId,
    webhookId,
    ok,
    retryInMs,
    record: {
      deliveryId: `dl_${webhookId}_${n}`,
      webhookId,
      organizationId: "org",
      eventId: `ev${n}`,
      event: "message.received",
      attempt: 1,
      responseStatus: ok ? 200 : 500,
      responseBody: null,
      error: null,
      durationMs: 3,
      createdAt: new Date(),
    },
  });

  it("logs every attempt, deletes finished jobs, reschedules retries, counts failures, deactivates at 10 and drops that webhook's jobs", async () => {
    await ds.query(
      `INSERT INTO webhooks.webhooks (id, organization_id, url, events, secret, consecutive_failures)
       VALUES ('wh_ok', 'org', 'http://x', '{message.received}', 's', 4), ('wh_bad', 'org', 'http://y', '{message.received}', 's', 8)`,
    );
    await ds.query(`INSERT INTO webhooks.events (id, organization_id, event, body) SELECT 'ev' || n, 'org', 'message.received', '{}' FROM generate_series(1, 6) n`);
    const jobs: Array<{ id: string; event_id: string; webhook_id: string }> = await ds.query(
      `INSERT INTO webhooks.delivery_jobs (event_id, webhook_id, organization_id)
       VALUES ('ev1', 'wh_ok', 'org'), ('ev2', 'wh_ok', 'org'), ('ev3', 'wh_bad', 'org'), ('ev4', 'wh_bad', 'org'), ('ev5', 'wh_bad', 'org'), ('ev6', 'wh_ok', 'org')
       RETURNING id::text, event_id, webhook_id`,
    );
    const job = (ev: string) => jobs.find((j) => j.event_id === ev)!.id;
    const deactivated = await repo.complete([
      completion(job("ev1"), "wh_ok", false, 60_000, 1), // failed, retried
      completion(job("ev2"), "wh_ok", true, null, 2), // delivered: resets wh_ok's count
      completion(job("ev3"), "wh_bad", false, 60_000, 3), // 9th failure, retried ...
      completion(job("ev4"), "wh_bad", false, 60_000, 4), // 10th: wh_bad deactivated; its retries are dropped, not rescheduled
    ]);
    expect(deactivated).to.deep.equal(["wh_bad"]);
    const hooks: Array<{ id: string; active: boolean; consecutive_failures: number; deactivated: boolean }> = await ds.query(
      `SELECT id, active, consecutive_failures, deactivated_at IS NOT NULL AS deactivated FROM webhooks.webhooks ORDER BY id`,
    );
    expect(hooks).to.deep.equal([
      { id: "wh_bad", active: false, consecutive_failures: 10, deactivated: true },
      { id: "wh_ok", active: true, consecutive_failures: 0, deactivated: false },
    ]);
    const left: Array<{ event_id: string; attempt: number; later: boolean }> = await ds.query(
      `SELECT event_id, attempt, due_at > now() + interval '30 seconds' AS later FROM webhooks.delivery_jobs ORDER BY event_id`,
    );
    expect(left).to.deep.equal([
      { event_id: "ev1", attempt: 2, later: true },
      { event_id: "ev6", attempt: 1, later: false },
    ]);
    const logged: Array<{ id: string }> = await ds.query(`SELECT id FROM webhooks.delivery_attempts ORDER BY id`);
    expect(logged.map((r) => r.id)).to.deep.equal(["dl_wh_bad_3", "dl_wh_bad_4", "dl_wh_ok_1", "dl_wh_ok_2"]);
  });
  it("counts failures up to the deactivation: a batch whose failures pass 10 stores 10, the count that deactivated it", async () => {
    // Attempts in flight together (the endpoint's concurrency) finish in one batch: 8 + 3 failures.
    await ds.query(`INSERT INTO webhooks.webhooks (id, organization_id, url, events, secret, consecutive_failures) VALUES ('wh_burst', 'org', 'http://z', '{message.received}', 's', 8)`);
    await ds.query(`INSERT INTO webhooks.events (id, organization_id, event, body) SELECT 'eb' || n, 'org', 'message.received', '{}' FROM generate_series(1, 3) n`);
    const jobs: Array<{ id: string }> = await ds.query(
      `INSERT INTO webhooks.delivery_jobs (event_id, webhook_id, organization_id) SELECT 'eb' || n, 'wh_burst', 'org' FROM generate_series(1, 3) n RETURNING id::text`,
    );
    const deactivated = await repo.complete(jobs.map((j, k) => completion(j.id, "wh_burst", false, 60_000, 100 + k)));
    expect(deactivated).to.deep.equal(["wh_burst"]);
    const [hook] = await ds.query(`SELECT active, consecutive_failures FROM webhooks.webhooks WHERE id = 'wh_burst'`);
    expect(hook).to.deep.equal({ active: false, consecutive_failures: 10 });
  });
});
