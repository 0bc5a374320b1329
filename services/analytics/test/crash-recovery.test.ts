/**
 * A consumer killed mid-batch and restarted counts every event once. Runs in
 * a database and bus namespace of its own, so that no other consumer applies
 * the events: whatever the killed consumer lost, only the restarted one can
 * make up for.
 */
import { expect } from "chai";
import { Bus, domainEvent } from "@platform/bus";
import { newId } from "@platform/id";
import { createLogger } from "@platform/logging";
import { startService } from "@platform/service";
import { createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";
import { openDatabase } from "@platform/db";
import type { DataSource } from "typeorm";
import { MessageEventIngestor } from "../src/bus/consumers/evt.message.status.consumer";
import { definition } from "../src/service";
import { queryAnalytics } from "../src/use-cases/query-analytics";

const log = createLogger("analytics-crash-test", "silent");

describe("analytics: a consumer killed mid-batch", () => {
  let env: TestEnvironment;
  let db: DataSource;
  let publisher: Bus;
  const buses: Bus[] = [];

  before(async function () {
    this.timeout(60_000);
    env = await createTestEnvironment("analytics_crash");
    // Migrations, streams and the durable, then the service goes away: the consumers below are the only ones.
    const svc = await startService(definition, env.serviceEnv(), { exitOnConfigError: false });
    await svc.stop();
    db = await openDatabase({ url: env.databaseUrl, schema: "analytics", entities: definition.entities, migrations: definition.migrations, applicationName: "analytics-crash-test" });
    publisher = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "publisher", log });
  });

  after(async function () {
    this.timeout(30_000);
    for (const b of buses) await b.close().catch(() => undefined);
    await publisher?.close();
    await db?.destroy();
    await env?.cleanup();
  });

  async function ingestor(hooks: ConstructorParameters<typeof MessageEventIngestor>[0]["hooks"]) {
    const bus = await Bus.connect({ url: env.natsUrl, namespace: env.namespace, name: "ingestor", log });
    buses.push(bus);
    const ing = new MessageEventIngestor({ db, bus, log, batchMax: 200, maxAckPending: 1_000, ackWaitMs: 1_000, hooks });
    await ing.start();
    return { bus, ing };
  }

  it("after a crash before one commit and after another (before its acks), the restarted consumer counts every event once", async function () {
    this.timeout(90_000);
    const org = newId("organization");
    const statuses = ["sent", "delivered", "read", "failed"] as const;
    const expected = { sent: 0, delivered: 0, read: 0, failed: 0 };
    const events = [];
    for (let k = 0; k < 1_500; k++) {
      const id = newId("message");
      const createdAt = new Date(Date.UTC(2026, 0, 1) + k * 3_599_999).toISOString();
      const top = k % 4;
      expected[statuses[top]!]++;
      const chain = top === 3 ? ["sent", "failed"] : statuses.slice(0, top + 1);
      for (const s of chain) {
        events.push(
          domainEvent(`message.${s as (typeof statuses)[number]}`, org, {
            messageId: id, conversationId: "conv_x", contactId: "ct_x", messagingChannelId: "ch_x", phone: "+15550001111",
            status: s as (typeof statuses)[number], providerMessageId: null, createdAt,
          }),
        );
      }
    }
    for (const e of events) await publisher.publish(e.subject, e.payload, { msgId: e.msgId });

    // First life: batch 2 is rolled back by a crash before its commit; the process "dies" there.
    let firstDied = false;
    const first = await ingestor({
      beforeCommit: async (_tx, n) => {
        if (n === 2) {
          firstDied = true;
          await first.bus.nc.close();
          throw new Error("killed before commit");
        }
      },
    });
    await eventually(() => firstDied, 30_000);
    await first.ing.stop();

    // Second life: batch 2 commits, then the process dies before acking it.
    let secondDied = false;
    const second = await ingestor({
      afterCommit: async (n) => {
        if (n === 2) {
          secondDied = true;
          await second.bus.nc.close();
          throw new Error("killed after commit, before ack");
        }
      },
    });
    await eventually(() => secondDied, 30_000);
    await second.ing.stop();

    // Third life runs to the end; the unacknowledged batches come back after the ack wait.
    const third = await ingestor(undefined);
    const year = { startDate: "2026-01-01", endDate: "2026-12-31" };
    await eventually(async () => (await queryAnalytics(db, org, year)).outboundMessages.total === 1_500, 60_000);
    // Everything delivered is acked: nothing pending, nothing left to redeliver.
    await eventually(async () => {
      const info = await third.bus.jsm.consumers.info(third.bus.streamName({ name: "EVENTS" } as any), third.ing.durable);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    }, 30_000);
    const final = await queryAnalytics(db, org, year);
    expect(final.outboundMessages.counts).to.deep.equal(expected);
    const [rows] = await db.query(`SELECT count(*)::int AS n FROM analytics.messages WHERE organization_id = $1`, [org]);
    expect(rows.n).to.equal(1_500);
    // The buckets agree with the rows at every granularity.
    const byLevel = await db.query(`SELECT granularity, status, sum(count)::int AS n FROM analytics.buckets WHERE organization_id = $1 GROUP BY 1, 2`, [org]);
    for (const g of ["h", "d", "m"]) {
      const level = Object.fromEntries(byLevel.filter((r: any) => r.granularity === g && r.n !== 0).map((r: any) => [r.status, r.n]));
      expect(level, g).to.deep.equal(expected);
    }
    await third.ing.stop();
  });
});
