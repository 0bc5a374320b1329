import { expect } from "chai";
import { eventually } from "@platform/testing";
import {
  api, getJob, newOrg, createChannel, createTemplate, recipients, sendsTo, setup, sharedHarness, startHarness, uniquePhone, waitForJob, type Harness,
} from "./helpers/harness";

const phones = (n: number) => Array.from({ length: n }, () => uniquePhone());

async function createJob(h: Harness, org: string, body: Record<string, unknown>) {
  const res = await api(h, org).post("/api/v1/templates/send").send(body);
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return res.body as { id: string; status: string; scheduledFor: string | null };
}

describe("running jobs: a waiting or huge job never starves the others", function () {
  this.timeout(90_000);
  let h: Harness;
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarness();
  });
  const db = () => h.svc.deps.db;

  it("jobs waiting for their throttle (throttlePerHour: 1) give their place back: the organization's and another's jobs run meanwhile", async () => {
    const a = await setup(h);
    const slow = [];
    for (let i = 0; i < 6; i++) {
      const list = phones(2);
      slow.push({ list, job: await createJob(h, a.org, { templateId: a.template.id, messagingChannelId: a.channel.id, recipients: recipients(list), throttlePerHour: 1 }) });
    }
    const sameOrg = phones(2);
    const normal = await createJob(h, a.org, { templateId: a.template.id, messagingChannelId: a.channel.id, recipients: recipients(sameOrg) });
    const b = await setup(h);
    const otherOrg = phones(2);
    const other = await createJob(h, b.org, { templateId: b.template.id, messagingChannelId: b.channel.id, recipients: recipients(otherOrg) });
    try {
      // JOB_CONCURRENCY is 4 and six throttled jobs came first: without giving their places back they held all four.
      await waitForJob(h, a.org, normal.id, "completed", 30_000);
      await waitForJob(h, b.org, other.id, "completed", 30_000);
      for (const p of [...sameOrg, ...otherOrg]) expect(sendsTo(h, p), p).to.equal(1);
      // Every throttled job sends its first recipient at once, then waits an hour for the second, still `running`
      // (sending started immediately: no scheduledFor) and released meanwhile.
      for (const { list, job } of slow) {
        const waiting = await eventually(async () => {
          const j = await getJob(h, a.org, job.id);
          const [row] = await db().query(`SELECT lease_owner, run_after FROM template_jobs.jobs WHERE id = $1`, [job.id]);
          return j.sent === 1 && row.lease_owner === null ? { j, row } : undefined;
        }, 30_000);
        expect(waiting.j).to.include({ status: "running", scheduledFor: null, sent: 1, recipients: 2 });
        expect(waiting.row.run_after.getTime()).to.be.greaterThan(Date.now() + 30 * 60_000);
        expect(list.map((p) => sendsTo(h, p)).sort()).to.deep.equal([0, 1]);
      }
    } finally {
      for (const { job } of slow) await api(h, a.org).post(`/api/v1/templates/send/${job.id}/cancel`);
    }
  });

  it("a throttled job released between its slots comes back for each one: spacing kept, every recipient once", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(3);
    // One slot every 3 s: more than the runner holds a job for its next slot.
    const job = await createJob(h, org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), throttlePerHour: 1_200 });
    await eventually(async () => {
      const [row] = await db().query(`SELECT status, sent, lease_owner FROM template_jobs.jobs WHERE id = $1`, [job.id]);
      return row.status === "running" && row.sent >= 1 && row.lease_owner === null;
    }, 20_000);
    const done = await waitForJob(h, org, job.id, "completed", 30_000);
    expect(done).to.include({ sent: 3, failed: 0, skipped: 0 });
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
    const slots: number[] = (
      await db().query(`SELECT slot_at FROM template_jobs.job_recipients WHERE job_id = $1 AND slot_at IS NOT NULL ORDER BY slot_at`, [job.id])
    ).map((r: { slot_at: Date }) => r.slot_at.getTime());
    expect(slots).to.have.length(3);
    for (let i = 1; i < slots.length; i++) expect(slots[i] - slots[i - 1], `gap ${i}`).to.be.at.least(3_000);
  });

  describe("one replica running one job at a time (own database)", function () {
    let solo: Harness;
    before(async function () {
      this.timeout(120_000);
      solo = await startHarness("tjfair");
      await solo.svc.stop();
      solo.svc = await solo.startReplica({ JOB_CONCURRENCY: "1", JOB_SLICE_MS: "300" });
    });
    after(async function () {
      this.timeout(60_000);
      await solo?.close();
    });

    it("another organization's job runs before one organization's huge jobs are done (time slice, fair claim)", async () => {
      const org1 = newOrg();
      // 20 msg/s: each 150-recipient job takes several seconds of the channel.
      const slowChannel = await createChannel(solo, org1, { messagesPerSecond: 20 });
      const t1 = await createTemplate(solo, org1);
      const big = [phones(150), phones(150)];
      const bigJobs = [];
      for (const list of big) bigJobs.push(await createJob(solo, org1, { templateId: t1.id, messagingChannelId: slowChannel.id, recipients: recipients(list) }));
      const org2 = newOrg();
      const c2 = await createChannel(solo, org2);
      const t2 = await createTemplate(solo, org2);
      const small = phones(2);
      const smallJob = await createJob(solo, org2, { templateId: t2.id, messagingChannelId: c2.id, recipients: recipients(small) });

      const smallDone = await waitForJob(solo, org2, smallJob.id, "completed", 60_000);
      const bigDone = [];
      for (const j of bigJobs) bigDone.push(await waitForJob(solo, org1, j.id, "completed", 60_000));
      // The service's own record: the small job finished before either huge job did (with one place and no
      // slice, it waited for both).
      for (const d of bigDone) expect(Date.parse(smallDone.completedAt!)).to.be.below(Date.parse(d.completedAt!));
      for (const d of bigDone) expect(d).to.include({ sent: 150, failed: 0, skipped: 0 });
      for (const p of [...big.flat(), ...small]) expect(sendsTo(solo, p), p).to.equal(1);
    });
  });
});
