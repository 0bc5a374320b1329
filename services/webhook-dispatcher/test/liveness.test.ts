import { expect } from "chai";
import { createLogger } from "@platform/logging";
import { DeliveryRepository } from "../src/db/repositories/delivery.repository";
import { Dispatcher } from "../src/use-cases/dispatcher";
import type { HttpSender, SendOutcome } from "../src/use-cases/http-sender";
import { EventIngestor } from "../src/use-cases/ingest-event";
import { eventually, newId, Receiver, startStack, type Stack } from "./helpers";

/**
 * A dispatcher process that dies holds the jobs it leased for 4 × WEBHOOK_TIMEOUT_MS + 60 s; with the beat (ADR 0019)
 * the live processes take them as soon as its beat has stopped.
 */
describe("a dispatcher process that stops beating loses its leases (ADR 0019)", () => {
  let stack: Stack;
  let receiver: Receiver;

  before(async () => {
    stack = await startStack("whd_liveness");
    receiver = await Receiver.start(() => ({ status: 200, body: "ok" }));
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  it("events a dead replica had leased (its attempts hanging) are delivered by the live one once its beat has stopped", async () => {
    const org = newId("organization");
    await stack.admin(org).post("", { url: receiver.url + "/r", events: ["message.received"] }).expect(201);
    const ds = stack.svc.deps.db;

    // A second replica whose attempts never end, that beats once (alive for 300 ms) and then never again: as a
    // process killed in the middle of its attempts. Its lease is 4 × 20 s + 60 s.
    const hanging: Array<(o: SendOutcome) => void> = [];
    const sender = {
      send: () => new Promise<SendOutcome>((resolve) => hanging.push(resolve)),
      close: async () => {
        for (const end of hanging.splice(0)) end({ ok: false, status: null, body: null, error: "closed", durationMs: 0 });
      },
    } as unknown as HttpSender;
    const repo2 = new DeliveryRepository(ds);
    const dead = new Dispatcher({ repo: repo2, sender, log: createLogger("dead", "silent"), retryDelaysMs: [150], timeoutMs: 20_000, beatEveryMs: 3_600_000, aliveForMs: 300 });
    dead.start();
    try {
      await eventually(async () => (await ds.query(`SELECT 1 FROM webhooks.dispatchers WHERE owner = $1`, [repo2.owner])).length === 1, 10_000);
      const ingestor = new EventIngestor(repo2, dead, createLogger("dead", "silent"));
      const ids = [newId("event"), newId("event"), newId("event")];
      for (const id of ids) {
        await ingestor.ingest({ event: "message.received", timestamp: new Date().toISOString(), organizationId: org, data: { id, messageId: newId("message") } } as never);
      }
      // Leased to the dying replica, due in minutes.
      await eventually(() => hanging.length === 3, 10_000);
      const leased = await ds.query(
        `SELECT count(*)::int AS n FROM webhooks.delivery_jobs WHERE lease_owner = $1 AND due_at > now() + interval '60 seconds'`,
        [repo2.owner],
      );
      expect(leased[0].n).to.equal(3);

      // The live replica's next beat finds the dead one's beat stopped and frees its jobs; it delivers them.
      await eventually(() => ids.every((id) => receiver.byEvent(id).length === 1), 20_000);
      const rows = await ds.query(`SELECT count(*)::int AS n FROM webhooks.dispatchers WHERE owner = $1`, [repo2.owner]);
      expect(rows[0].n).to.equal(0);
    } finally {
      await dead.stop();
    }
  });

  it("a process that stops cleanly leaves the table; a live one's leases are never taken", async () => {
    const ds = stack.svc.deps.db;
    const repo = new DeliveryRepository(ds);
    await repo.beat(60_000);
    // Another live process (the stack's own dispatcher beats too) frees nothing of a live one.
    expect(await new DeliveryRepository(ds).freeDeadLeases()).to.equal(0);
    expect((await ds.query(`SELECT 1 FROM webhooks.dispatchers WHERE owner = $1`, [repo.owner])).length).to.equal(1);
    await repo.leave();
    expect((await ds.query(`SELECT 1 FROM webhooks.dispatchers WHERE owner = $1`, [repo.owner])).length).to.equal(0);
  });
});
