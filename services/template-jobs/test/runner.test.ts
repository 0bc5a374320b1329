import { expect } from "chai";
import { MESSAGING_SUBJECTS, SUBJECTS, TEMPLATE_JOBS_RPC, toProviderDigits } from "@platform/contracts";
import { collectSubject, eventually } from "@platform/testing";
import {
  api, createTemplate, eventsOf, getJob, optOut, recipients, sendsTo, setup, sharedHarness, templateRequestsTo, TEMPLATE_ACCOUNT_ID,
  uniquePhone, waitForJob, type Harness,
} from "./helpers/harness";

describe("running jobs: exactly once, opt-outs, schedule, throttle, pause/resume, cancel", function () {
  this.timeout(90_000);
  let h: Harness;
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarness();
  });
  afterEach(() => h.sim.setMode({ kind: "ok" }));

  const phones = (n: number) => Array.from({ length: n }, () => uniquePhone());
  async function createJob(org: string, body: Record<string, unknown>) {
    const res = await api(h, org).post("/api/v1/templates/send").send(body);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body as { id: string; status: string; scheduledFor: string | null };
  }
  const db = () => h.svc.deps.db;
  const slots = async (jobId: string) =>
    // In time order: the lanes reserve consecutive slots, not necessarily in recipient order.
    (await db().query(`SELECT slot_at FROM template_jobs.job_recipients WHERE job_id = $1 AND slot_at IS NOT NULL ORDER BY slot_at`, [jobId])).map(
      (r: { slot_at: Date }) => r.slot_at.getTime(),
    );

  it("sends every recipient once, as a template message with the contract's components, and completes with counts", async () => {
    const { org, channel, template } = await setup(h, { bodyParameterCount: 2, headerFormat: "document" });
    const list = phones(3);
    const job = await createJob(org, {
      templateId: template.id,
      messagingChannelId: channel.id,
      headerMedia: { url: "https://example.com/a.pdf", fileName: "a.pdf" },
      recipients: list.map((phone, i) => ({
        phone,
        bodyParameters: [`Ann${i}`, "42"],
        ...(i === 0 ? { buttonParameters: [{ type: "quick_reply", payload: "YES" }, { type: "url", text: "abc", index: 2 }] } : {}),
      })),
    });
    const done = await waitForJob(h, org, job.id, "completed");
    expect(done).to.include({ recipients: 3, sent: 3, failed: 0, skipped: 0 });
    expect(Date.parse(done.startedAt!)).to.be.at.most(Date.parse(done.completedAt!));
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
    const [first] = templateRequestsTo(h, list[0]);
    expect(first.phoneNumberId).to.equal(channel.providerPhoneNumberId);
    expect((first.body as any).template).to.deep.equal({
      name: template.name,
      language: { policy: "deterministic", code: "en_US" },
      components: [
        { type: "header", parameters: [{ type: "document", document: { link: "https://example.com/a.pdf", filename: "a.pdf" } }] },
        { type: "body", parameters: [{ type: "text", text: "Ann0" }, { type: "text", text: "42" }] },
        { type: "button", sub_type: "quick_reply", index: "0", parameters: [{ type: "payload", payload: "YES" }] },
        { type: "button", sub_type: "url", index: "2", parameters: [{ type: "text", text: "abc" }] },
      ],
    });
    expect((templateRequestsTo(h, list[1])[0].body as any).template.components).to.have.length(2);
    // Recorded as messages of the messaging service: message.sent with templateJobId, a conversation each.
    await eventually(() => eventsOf(h, "message.sent", (d) => d.templateJobId === job.id).length === 3);
    const sent = eventsOf(h, "message.sent", (d) => d.templateJobId === job.id);
    expect(sent.map((e) => e.data.phone).sort()).to.deep.equal([...list].sort());
    expect(eventsOf(h, "conversation.opened", (d) => list.includes(d.phone))).to.have.length(3);
  });

  it("sends no component at all for a template without parameters or header (numeric template id)", async () => {
    const { org, channel, template } = await setup(h, { bodyParameterCount: 0 });
    const [p] = phones(1);
    const job = await createJob(org, { templateId: template.providerTemplateId, templateAccountId: TEMPLATE_ACCOUNT_ID, messagingChannelId: channel.id, recipients: [{ phone: p }] });
    await waitForJob(h, org, job.id, "completed");
    const [req] = templateRequestsTo(h, p);
    expect((req.body as any).template).to.deep.equal({ name: template.name, language: { policy: "deterministic", code: "en_US" } });
  });

  it("skips opted-out recipients: counted as skipped, never reaching the provider", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(5);
    await optOut(h, org, channel.id, list[1]);
    await optOut(h, org, channel.id, list[3]);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    const done = await waitForJob(h, org, job.id, "completed");
    expect(done).to.include({ sent: 3, skipped: 2, failed: 0 });
    expect(list.map((p) => templateRequestsTo(h, p).length)).to.deep.equal([1, 0, 1, 0, 1]);
    // Contract: contacts are created by template jobs; the skipped recipients are contacts too.
    const res = await api(h, org, h.contacts).get("/api/v1/contacts?limit=100");
    expect(res.status).to.equal(200);
    expect((res.body.items as Array<{ phone: string }>).map((c) => c.phone).sort()).to.deep.equal([...list].sort());
  });

  it("a recipient opted out while its send waits for a retry in messaging is counted skipped, never sent", async () => {
    const { org, channel, template } = await setup(h);
    const [p, q] = phones(2);
    // Every provider call fails transiently: both sends wait in messaging's retries (recipients `waiting`).
    h.sim.setMode({ kind: "error", httpStatus: 503, code: 2, message: "Service temporarily unavailable", times: 100_000, phoneNumberId: channel.providerPhoneNumberId });
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients([p, q]) });
    await eventually(async () => templateRequestsTo(h, p).length >= 1 && templateRequestsTo(h, q).length >= 1, 20_000);
    await optOut(h, org, channel.id, p);
    h.sim.setMode({ kind: "ok" });
    const done = await waitForJob(h, org, job.id, "completed");
    expect(done).to.include({ recipients: 2, sent: 1, skipped: 1, failed: 0 });
    expect(templateRequestsTo(h, p).every((r) => r.responseStatus === 503), "p never accepted").to.equal(true);
  });

  it("sends a phone listed twice (in two spellings) once: later entries are counted skipped, never sent", async () => {
    const { org, channel, template } = await setup(h);
    const [p, q] = phones(2);
    // "+14155550123" and "1 415 555 0123" are one number once normalized.
    const spaced = `1 ${p.slice(2, 5)} ${p.slice(5, 8)} ${p.slice(8)}`;
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients([p, q, spaced, p]) });
    const done = await waitForJob(h, org, job.id, "completed");
    expect(done).to.include({ recipients: 4, sent: 2, skipped: 2, failed: 0 });
    expect(sendsTo(h, p)).to.equal(1);
    expect(templateRequestsTo(h, p)).to.have.length(1);
    expect(sendsTo(h, q)).to.equal(1);
    // The first entry is the one sent (its body parameters).
    expect((templateRequestsTo(h, p)[0].body as any).template.components[0].parameters[0].text).to.equal("v0_0");
  });

  it("starts a scheduled job at scheduledFor, not before, also across a restart", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(2);
    const scheduledAt = new Date(Date.now() + 2_500).toISOString();
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), scheduledAt });
    expect(job.status).to.equal("queued");
    expect(job.scheduledFor).to.equal(scheduledAt);
    await h.restart();
    const done = await waitForJob(h, org, job.id, "completed");
    // The runner's own record: started no earlier than the schedule, and nothing was sent before.
    expect(Date.parse(done.startedAt!)).to.be.at.least(Date.parse(scheduledAt));
    for (const p of list) {
      expect(sendsTo(h, p)).to.equal(1);
      expect(templateRequestsTo(h, p)[0].receivedAt).to.be.at.least(Date.parse(scheduledAt));
    }
  });

  it("spreads a throttled job evenly: one slot every 3600/throttlePerHour seconds, decided and stored by the runner", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(8);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), throttlePerHour: 36_000 });
    await waitForJob(h, org, job.id, "completed");
    const decided = await slots(job.id);
    expect(decided).to.have.length(8);
    for (let i = 1; i < decided.length; i++) expect(decided[i] - decided[i - 1], `gap ${i}`).to.be.at.least(100);
    for (const p of list) expect(sendsTo(h, p)).to.equal(1);
  });

  it("pauses while the template is paused and resumes when it is approved again; every recipient still once", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(60);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), throttlePerHour: 36_000 });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 2, 20_000);
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event: "PAUSED" });
    const paused = await waitForJob(h, org, job.id, "paused");
    expect(paused.sent).to.be.below(60);
    await eventually(() => eventsOf(h, "template.status_updated", (d) => d.templateId === template.id && d.status === "paused").length === 1);
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event: "APPROVED" });
    const done = await waitForJob(h, org, job.id, "completed", 30_000);
    expect(done.sent).to.equal(60);
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("a throttled job sends nothing once it reads paused: the slots its lanes had reserved pass unsent", async () => {
    // One send a second: each lane holds a slot up to 2 s ahead when the pause comes.
    const { org, channel, template } = await setup(h);
    const list = phones(20);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), throttlePerHour: 3_600 });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 2, 20_000);
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event: "PAUSED" });
    await eventually(async () => (await getJob(h, org, job.id)).status === "paused", 20_000, 5);
    const atPause = list.reduce((n, p) => n + sendsTo(h, p), 0);
    // The run has let go (no lane waits for a slot any more) and every slot it had reserved is past.
    await eventually(async () => {
      const [row] = await db().query(
        `SELECT j.lease_owner IS NULL AND clock_timestamp() > COALESCE(max(r.slot_at), '-infinity') AS done
         FROM template_jobs.jobs j LEFT JOIN template_jobs.job_recipients r ON r.job_id = j.id WHERE j.id = $1 GROUP BY j.id`,
        [job.id],
      );
      return row.done;
    }, 20_000);
    expect(list.reduce((n, p) => n + sendsTo(h, p), 0), "sends after the job read paused").to.equal(atPause);
    expect((await getJob(h, org, job.id)).sent).to.equal(atPause);
    const [open] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'sending'`, [job.id]);
    expect(open.n).to.equal(0);
  });

  it("a pause holds the sends of the batches in flight that have not gone yet; they go once the template is approved again, each once", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 10 });
    const list = phones(30);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 3, 20_000);
    const status = (event: "PAUSED" | "APPROVED") =>
      h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event });
    await status("PAUSED");
    await waitForJob(h, org, job.id, "paused");
    // The run has recorded its batches: sends messaging held back (stored, not sent) wait for the job to resume.
    await eventually(async () => {
      const [open] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'sending'`, [job.id]);
      return open.n === 0;
    }, 20_000);
    const [held] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending' AND provider_message_id IS NULL`, [job.id]);
    expect(held.n, "sends of the batches in flight held back by the pause").to.be.at.least(1);
    const accepted = list.reduce((n, p) => n + sendsTo(h, p), 0);
    const [sentRows] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND provider_message_id IS NOT NULL`, [job.id]);
    expect(accepted).to.equal(sentRows.n);
    await status("APPROVED");
    const done = await waitForJob(h, org, job.id, "completed", 60_000);
    expect(done).to.include({ sent: 30, failed: 0 });
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("fails the job when the template is disabled", async () => {
    const { org, channel, template } = await setup(h);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(phones(60)), throttlePerHour: 36_000 });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 1, 20_000);
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event: "DISABLED" });
    const failed = await waitForJob(h, org, job.id, "failed");
    expect(failed.completedAt).to.be.a("string");
    expect(failed.sent).to.be.below(60);
  });

  it("a job failed by its template's disabling ends the sends it held back `cancelled`: no message.failed, not counted failed", async () => {
    // 20/s: batches of 4, three in flight, each paced over about 200 ms; the disabling comes while some are.
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const list = phones(80);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event: "DISABLED" });
    await waitForJob(h, org, job.id, "failed");
    // The held sends go to messaging's retry worker, which asks the job's state and ends them.
    await eventually(async () => (await db().query(`SELECT 1 FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending'`, [job.id])).length === 0, 20_000);
    const held: Array<{ id: string }> = await db().query(`SELECT id FROM messaging.messages WHERE template_job_id = $1 AND provider_message_id IS NULL`, [job.id]);
    const ended: Array<{ status: string; error_code: string }> = await db().query(`SELECT DISTINCT status, error_code FROM messaging.messages WHERE id = ANY($1::text[])`, [held.map((m) => m.id)]);
    expect(ended.filter((e) => !(e.status === "cancelled" && e.error_code === "job_failed")), JSON.stringify(ended)).to.deep.equal([]);
    // The job's own record of them agrees: `cancelled`, none left `waiting`.
    const states: Array<{ state: string; n: number }> = await db().query(
      `SELECT state, count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state IN ('waiting', 'cancelled') GROUP BY state`,
      [job.id],
    );
    expect(states, JSON.stringify(states)).to.deep.equal(held.length ? [{ state: "cancelled", n: held.length }] : []);
    const accepted = list.reduce((n, p) => n + sendsTo(h, p), 0);
    const after = await getJob(h, org, job.id);
    expect(after).to.include({ status: "failed", sent: accepted, failed: 0 });
    expect(eventsOf(h, "message.failed", (d) => d.templateJobId === job.id)).to.deep.equal([]);
  });

  it("a job failed by its template's disabling reads `failed` only once its batches in flight are counted: its counts never move after", async () => {
    // 20/s: batches of 4, three in flight, each paced over about 200 ms; the disabling comes while some are.
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const list = phones(80);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event: "DISABLED" });
    // The first read that says `failed`, against the job once messaging holds nothing of it any more.
    const first = await eventually(async () => {
      const now = await getJob(h, org, job.id);
      return now.status === "failed" ? now : undefined;
    }, 20_000, 5);
    await eventually(async () => (await db().query(`SELECT 1 FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending'`, [job.id])).length === 0, 20_000);
    const later = await getJob(h, org, job.id);
    const accepted = list.reduce((n, p) => n + sendsTo(h, p), 0);
    expect(accepted).to.be.below(80);
    expect({ sent: first.sent, failed: first.failed, completedAt: first.completedAt }, "when first read failed").to.deep.equal({
      sent: accepted,
      failed: 0,
      completedAt: later.completedAt,
    });
    expect(later).to.include({ status: "failed", sent: accepted, failed: 0 });
    // Completed when it stopped sending: after its last send reached the provider.
    const lastSend = Math.max(...list.flatMap((p) => templateRequestsTo(h, p).map((r) => (r as { receivedAt: number }).receivedAt)));
    expect(Date.parse(first.completedAt!)).to.be.at.least(lastSend);
  });

  it("a stop whose holder died takes effect once its lease is over, with that run's unrecorded batch counted first; the job never runs again", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(3);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await waitForJob(h, org, job.id, "completed");
    // As a job a run held when its cancel came, and the run died before letting go: running, stop asked, lease live;
    // its last batch (two recipients, sent by messaging) unrecorded, and one recipient never claimed.
    await db().query(`UPDATE template_jobs.job_recipients SET state = CASE WHEN seq < 2 THEN 'sending' ELSE 'pending' END, message_id = NULL WHERE job_id = $1`, [job.id]);
    await db().query(
      `UPDATE template_jobs.jobs SET status = 'running', completed_at = NULL, sent = 0, stop_as = 'cancelled', lease_owner = 'dead-run',
         lease_until = clock_timestamp() + interval '1 hour' WHERE id = $1`,
      [job.id],
    );
    expect((await getJob(h, org, job.id)).status, "while the lease lives").to.equal("running");
    // The dead run's lease runs out.
    await db().query(`UPDATE template_jobs.jobs SET lease_until = clock_timestamp() - interval '1 millisecond' WHERE id = $1`, [job.id]);
    // The first read that says `cancelled` already counts the dead run's batch.
    const ended = await eventually(async () => {
      const now = await getJob(h, org, job.id);
      return now.status === "cancelled" ? now : undefined;
    }, 20_000, 5);
    expect(ended).to.include({ sent: 2, failed: 0 });
    expect(ended.completedAt).to.be.a("string");
    const [row] = await db().query(`SELECT stop_as, lease_owner FROM template_jobs.jobs WHERE id = $1`, [job.id]);
    expect(row).to.deep.equal({ stop_as: null, lease_owner: null });
    // Its pending recipient is never claimed: each phone reached the provider once, by the first run.
    const states = await db().query(`SELECT state, count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 GROUP BY state ORDER BY state`, [job.id]);
    expect(states).to.deep.equal([{ state: "pending", n: 1 }, { state: "sent", n: 2 }]);
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("stops sending on cancel: a throttled job's claimed recipients go back unsent, and the run has let go when the cancel answers", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(30);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), throttlePerHour: 36_000 });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 2, 20_000);
    const cancelled = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
    expect(cancelled.body.status).to.equal("cancelled");
    // The answer comes after the run stopped: lease released, the lanes' claimed rows (never sent) `pending` again.
    const [row] = await db().query(`SELECT lease_owner FROM template_jobs.jobs WHERE id = $1`, [job.id]);
    const [open] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'sending'`, [job.id]);
    expect(row.lease_owner).to.equal(null);
    expect(open.n).to.equal(0);
    const total = list.reduce((n, p) => n + sendsTo(h, p), 0);
    expect(total).to.equal(cancelled.body.sent);
    expect(total).to.be.below(30);
    expect((await getJob(h, org, job.id)).status).to.equal("cancelled");
  });

  it("cancel answers where the job stopped: every send made is counted in the answer, and none is left to come after it", async () => {
    // 20/s: batches of 4, three in flight, each paced over about 200 ms; the cancel comes while some are.
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const list = phones(80);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    const cancelled = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
    expect(cancelled.body.status).to.equal("cancelled");
    const total = list.reduce((n, p) => n + sendsTo(h, p), 0);
    expect(cancelled.body.sent, "sends at the provider when the cancel answered").to.equal(total);
    expect(total).to.be.below(80);
    // Nothing that could still be sent: no recipient claimed or waiting, no message of the job pending in messaging.
    // The sends of the batches in flight that had not gone when the cancel came were held back: `cancelled`, never
    // sent, so counted neither sent nor failed (the provider failed nothing).
    const open = await db().query(
      `SELECT r.state, r.message_id, m.status, m.error_code, m.lease_until, m.next_attempt_at FROM template_jobs.job_recipients r
       LEFT JOIN messaging.messages m ON m.id = r.message_id WHERE r.job_id = $1 AND r.state IN ('sending', 'waiting')`,
      [job.id],
    );
    expect(open, JSON.stringify(open)).to.have.length(0);
    const [pending] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending'`, [job.id]);
    expect(pending.n).to.equal(0);
    const [held] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND status = 'cancelled' AND provider_message_id IS NULL AND error_code = 'job_cancelled'`, [job.id]);
    expect(cancelled.body.failed).to.equal(0);
    const [heldRecipients] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'cancelled'`, [job.id]);
    expect(heldRecipients.n).to.equal(held.n);
    const [stored] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1`, [job.id]);
    expect(stored.n).to.equal(total + held.n);
    // Completed when it stopped sending: after its last send reached the provider.
    const lastSend = Math.max(...list.flatMap((p) => templateRequestsTo(h, p).map((r) => (r as { receivedAt: number }).receivedAt)));
    expect(Date.parse(cancelled.body.completedAt)).to.be.at.least(lastSend);
  });

  it("a cancel repeated while the first one waits for the run answers the same counts, once the run has stopped", async () => {
    // 20/s: batches of 4, three in flight, each paced over about 200 ms; the first cancel waits for them.
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const list = phones(80);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    const first = api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`).then((r) => r);
    // The second comes once the first has asked the stop (a client's retry after a timeout, say).
    await eventually(async () => (await db().query(`SELECT 1 FROM template_jobs.jobs WHERE id = $1 AND stop_as = 'cancelled'`, [job.id])).length === 1, 5_000, 5);
    const second = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
    const answered = await first;
    const later = await getJob(h, org, job.id);
    expect(second.body.status).to.equal("cancelled");
    expect({ sent: second.body.sent, failed: second.body.failed }, "the repeated cancel").to.deep.equal({ sent: later.sent, failed: later.failed });
    expect({ sent: answered.body.sent, failed: answered.body.failed }, "the first cancel").to.deep.equal({ sent: later.sent, failed: later.failed });
    expect(later.sent).to.equal(list.reduce((n, p) => n + sendsTo(h, p), 0));
  });

  it("cancel also ends the sends messaging was retrying (130429): `cancelled`, no message.failed, not counted failed, none sent after it", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const facts = await collectSubject(h.env.natsUrl, `${h.env.namespace}.${MESSAGING_SUBJECTS.messageCancelled.subject}`);
    const list = phones(40);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    h.sim.setMode({ kind: "error", httpStatus: 429, code: 130429, message: "throughput", times: 1_000_000, phoneNumberId: channel.providerPhoneNumberId });
    try {
      // Some sends answered 130429: messaging holds them for a retry.
      await eventually(async () => {
        const [w] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'waiting'`, [job.id]);
        return w.n >= 2;
      }, 20_000);
      const cancelled = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
      expect(cancelled.body.status).to.equal("cancelled");
      const accepted = list.reduce((n, p) => n + sendsTo(h, p), 0);
      expect(cancelled.body.sent).to.equal(accepted);
      // Nothing left to send: no recipient waiting, no message of the job pending in messaging; the retried ones were
      // never sent (the provider answered 130429, a transient failure), so they end `cancelled`, not failed.
      const [open] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state IN ('sending', 'waiting')`, [job.id]);
      expect(open.n).to.equal(0);
      const [pending] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending'`, [job.id]);
      expect(pending.n).to.equal(0);
      const stopped: Array<{ id: string }> = await db().query(`SELECT id FROM messaging.messages WHERE template_job_id = $1 AND error_code = 'job_cancelled' AND status = 'cancelled'`, [job.id]);
      expect(stopped.length).to.be.at.least(1);
      expect(cancelled.body.failed).to.equal(0);
      const [recipientsCancelled] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'cancelled'`, [job.id]);
      expect(recipientsCancelled.n).to.equal(stopped.length);
      // Analytics is told by a fact per message; the public events say nothing of them (written in the same
      // transaction as the facts, so they would have come by now).
      await eventually(() => stopped.every((m) => facts.received.some((f) => f.data.messageId === m.id)));
      expect(eventsOf(h, "message.failed", (d) => d.templateJobId === job.id)).to.deep.equal([]);
      expect((await getJob(h, org, job.id))).to.include({ sent: cancelled.body.sent, failed: 0 });
    } finally {
      h.sim.setMode({ kind: "ok" });
      await facts.close();
    }
  });

  it("a send the cancel stopped whose unanswered call the provider had accepted after all moves on with the provider's statuses, and is counted sent", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const list = phones(40);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    // The provider answers the next calls after messaging's timeout (1.5 s here): they go unanswered, and are accepted.
    h.sim.setMode({ kind: "slow", delayMs: 4_000, times: 4, phoneNumberId: channel.providerPhoneNumberId });
    try {
      await eventually(async () => (await db().query(`SELECT 1 FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'waiting'`, [job.id])).length >= 1, 20_000);
      const cancelled = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
      expect(cancelled.body).to.include({ status: "cancelled", failed: 0 });
      const cancelledIds = ((await db().query(`SELECT id FROM messaging.messages WHERE template_job_id = $1 AND status = 'cancelled'`, [job.id])) as Array<{ id: string }>).map((r) => r.id);
      // The provider's late answers: some of the sends the cancel stopped had been accepted after all.
      const stopped = await eventually(() => {
        const ids = h.sim.requests.filter((r) => r.responseStatus === 200 && cancelledIds.includes((r.body as { biz_opaque_callback_data?: string }).biz_opaque_callback_data ?? ""));
        return ids.length >= 1 ? ids.map((r) => ({ id: (r.body as { biz_opaque_callback_data: string }).biz_opaque_callback_data })) : undefined;
      }, 20_000);
      // Then its status callbacks: those sends are what the provider says.
      const accepted = () => list.reduce((n, p) => n + sendsTo(h, p), 0);
      await eventually(async () => {
        const rows: Array<{ status: string }> = await db().query(`SELECT status FROM messaging.messages WHERE id = ANY($1::text[])`, [stopped.map((m) => m.id)]);
        return rows.every((r) => r.status === "read");
      }, 30_000);
      for (const m of stopped) {
        expect(eventsOf(h, "message.sent", (d) => d.messageId === m.id), m.id).to.have.length(1);
        expect(eventsOf(h, "message.read", (d) => d.messageId === m.id), m.id).to.have.length(1);
      }
      await eventually(async () => (await getJob(h, org, job.id)).sent === accepted(), 20_000);
      expect(await getJob(h, org, job.id)).to.include({ status: "cancelled", failed: 0 });
      const [left] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients r JOIN messaging.messages m ON m.id = r.message_id WHERE r.job_id = $1 AND r.state = 'cancelled' AND m.status <> 'cancelled'`, [job.id]);
      expect(left.n).to.equal(0);
    } finally {
      h.sim.setMode({ kind: "ok" });
    }
  });

  it("a send the cancel stopped while its call went unanswered, whose late answer is an acceptance, is sent and counted without any status callback", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const [phone] = phones(1);
    // No status callbacks: only the call's own late answer can tell that the provider took the message.
    h.sim.setWebhookUrl(undefined);
    h.sim.setMode({ kind: "held", times: 1, phoneNumberId: channel.providerPhoneNumberId });
    try {
      const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients([phone]) });
      // The call is at the provider and went unanswered within messaging's timeout (1.5 s here): a retry is scheduled.
      const [unanswered] = await eventually(async () => {
        const rows: Array<{ id: string }> = await db().query(`SELECT id FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending' AND error_code = 'timeout'`, [job.id]);
        return rows.length === 1 ? rows : undefined;
      }, 20_000);
      const cancelled = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
      expect(cancelled.body).to.include({ status: "cancelled", sent: 0 });
      await eventually(async () => (await db().query(`SELECT 1 FROM messaging.messages WHERE id = $1 AND status = 'cancelled'`, [unanswered.id])).length === 1, 20_000);
      // The provider answers now: it had taken the message.
      h.sim.release();
      const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === unanswered.id)[0], 20_000);
      expect(sent.data.providerMessageId).to.equal(templateRequestsTo(h, phone)[0].providerMessageId);
      const [row] = await db().query(`SELECT status, error_code FROM messaging.messages WHERE id = $1`, [unanswered.id]);
      expect(row).to.deep.equal({ status: "sent", error_code: null });
      await eventually(async () => (await getJob(h, org, job.id)).sent === 1, 20_000);
      expect(await getJob(h, org, job.id)).to.include({ status: "cancelled", sent: 1, failed: 0 });
      expect(sendsTo(h, phone)).to.equal(1);
    } finally {
      h.sim.setWebhookUrl(h.providerWebhookUrl);
    }
  });

  it("a send messaging retries after its job was cancelled, with no stop asked (template-jobs gone meanwhile), ends `cancelled` when its retry asks the job's state", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const facts = await collectSubject(h.env.natsUrl, `${h.env.namespace}.${MESSAGING_SUBJECTS.messageCancelled.subject}`);
    h.sim.setMode({ kind: "error", httpStatus: 429, code: 130429, message: "throughput", times: 1_000_000, phoneNumberId: channel.providerPhoneNumberId });
    try {
      const list = phones(6);
      const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
      const waiting = await eventually(async () => {
        const rows: Array<{ message_id: string }> = await db().query(`SELECT message_id FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'waiting'`, [job.id]);
        return rows.length >= 2 ? rows.map((r) => r.message_id) : undefined;
      }, 20_000);
      // The job's status as a cancel writes it, without the rest of the cancel (the process that took it died).
      await db().query(`UPDATE template_jobs.jobs SET status = 'cancelled' WHERE id = $1`, [job.id]);
      await eventually(async () => {
        const rows: Array<{ status: string }> = await db().query(`SELECT status FROM messaging.messages WHERE id = ANY($1::text[])`, [waiting]);
        return rows.length === waiting.length && rows.every((r) => r.status === "cancelled");
      }, 30_000);
      await eventually(() => waiting.every((id) => facts.received.some((f) => f.data.messageId === id)));
      expect(eventsOf(h, "message.failed", (d) => d.templateJobId === job.id)).to.deep.equal([]);
      expect(list.reduce((n, p) => n + sendsTo(h, p), 0)).to.equal(0);
    } finally {
      h.sim.setMode({ kind: "ok" });
      await facts.close();
    }
  });

  it("an organization switched to `inactive` stops sending its running job; back on a plan, the job finishes, each recipient once", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const plan = async (p: string, at: Date) => {
      const fact = { id: org, name: "Org", plan: p, rateLimit: { perSecond: 10, burst: 20 }, optOutKeywords: [], createdAt: "2026-01-01T00:00:00.000Z", updatedAt: at.toISOString(), deleted: false };
      await h.bus.publish(SUBJECTS.organizationUpserted.subject, fact, { msgId: `org:${org}:${at.getTime()}` });
      await eventually(async () => (await db().query(`SELECT 1 FROM template_jobs.organizations WHERE id = $1 AND plan = $2`, [org, p])).length === 1);
    };
    // 200 recipients at 20/s: about 10 s of sending, batches of 4, three in flight.
    const list = phones(200);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 4, 20_000);
    await plan("inactive", new Date());
    // Counted once the copy is stored: from here each lane's next lease renewal fails, whatever the machine's speed.
    const before = list.reduce((n, p) => n + sendsTo(h, p), 0);
    // The run stops at its next round: its batches in flight answered and recorded, its lease let go.
    await eventually(async () => (await db().query(`SELECT 1 FROM template_jobs.jobs WHERE id = $1 AND lease_owner IS NULL`, [job.id])).length === 1, 20_000);
    const stopped = list.reduce((n, p) => n + sendsTo(h, p), 0);
    // At most the batches in flight and those claimed before the plan reached the runner (three lanes of 4, twice).
    expect(stopped - before, "sends after the switch").to.be.at.most(24);
    // Another organization's job runs to its end meanwhile: the runner claimed and ran work, and left this one alone.
    const other = await setup(h);
    const otherJob = await createJob(other.org, { templateId: other.template.id, messagingChannelId: other.channel.id, recipients: recipients(phones(3)) });
    await waitForJob(h, other.org, otherJob.id, "completed");
    expect(list.reduce((n, p) => n + sendsTo(h, p), 0), "sends while inactive").to.equal(stopped);
    expect((await getJob(h, org, job.id)).status).to.equal("running");
    // messaging's retries of the job's sends are told to wait (as for a paused job).
    const state = await h.bus.request(TEMPLATE_JOBS_RPC.jobState, { organizationId: org, jobId: job.id }, { timeoutMs: 5_000 });
    expect(state.status).to.equal("paused");

    await plan("growth", new Date(Date.now() + 1));
    const done = await waitForJob(h, org, job.id, "completed", 60_000);
    expect(done).to.include({ sent: 200, failed: 0 });
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("a paused job's sends messaging retries wait while it is paused, and go once it is approved again", async () => {
    const { org, channel, template } = await setup(h, {}, { messagesPerSecond: 20 });
    const list = phones(12);
    h.sim.setMode({ kind: "error", httpStatus: 429, code: 130429, message: "throughput", times: 1_000_000, phoneNumberId: channel.providerPhoneNumberId });
    let restored = false;
    try {
      const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
      await eventually(async () => {
        const [w] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'waiting'`, [job.id]);
        return w.n >= 1;
      }, 20_000);
      const status = (event: "PAUSED" | "APPROVED") =>
        h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: template.providerTemplateId, name: template.name, language: template.language, event });
      await status("PAUSED");
      await waitForJob(h, org, job.id, "paused");
      h.sim.setMode({ kind: "ok" });
      restored = true;
      // Messaging's retries of the job see it paused and wait (what messaging decided for them).
      await eventually(async () => {
        const [p] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND status = 'pending' AND error_code = 'job_paused'`, [job.id]);
        return p.n >= 1;
      }, 20_000);
      const [sentWhilePaused] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE template_job_id = $1 AND status <> 'pending'`, [job.id]);
      await status("APPROVED");
      const done = await waitForJob(h, org, job.id, "completed", 60_000);
      expect(done).to.include({ sent: 12, failed: 0 });
      for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
      expect(sentWhilePaused.n).to.be.below(12);
    } finally {
      if (!restored) h.sim.setMode({ kind: "ok" });
    }
  });

  it("settles a cancelled job's recipients a dead run left `sending`: messaging's outcomes are counted, keys it never stored stay unsent", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(6);
    const done = await waitForJob(h, org, (await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) })).id, "completed");
    expect(done.sent).to.equal(6);
    // As a run that died after messaging sent three of them, before recording their batch, and the job cancelled then;
    // plus one recipient claimed whose batch never reached messaging (its key is unknown there).
    await db().query(
      `UPDATE template_jobs.job_recipients SET state = 'sending', message_id = NULL WHERE job_id = $1 AND seq IN (SELECT seq FROM template_jobs.job_recipients WHERE job_id = $1 ORDER BY seq LIMIT 3)`,
      [done.id],
    );
    const [lost] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'sending'`, [done.id]);
    expect(lost.n).to.equal(3);
    const never = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(phones(2)), scheduledAt: new Date(Date.now() + 3_600_000).toISOString() });
    await db().query(`UPDATE template_jobs.job_recipients SET state = 'sending' WHERE job_id = $1 AND seq = (SELECT min(seq) FROM template_jobs.job_recipients WHERE job_id = $1)`, [never.id]);
    await db().query(`UPDATE template_jobs.jobs SET status = 'cancelled', sent = 3, settle_after = now() WHERE id = $1`, [done.id]);
    expect((await api(h, org).post(`/api/v1/templates/send/${never.id}/cancel`)).body.status).to.equal("cancelled");

    const settled = await eventually(async () => {
      const job = await getJob(h, org, done.id);
      return job.sent === 6 ? job : undefined;
    }, 20_000);
    expect(settled.status).to.equal("cancelled");
    const [open] = await db().query(`SELECT count(*)::int AS n FROM template_jobs.job_recipients WHERE job_id = $1 AND state = 'sending'`, [done.id]);
    expect(open.n).to.equal(0);
    await eventually(async () => {
      const [row] = await db().query(`SELECT settle_after FROM template_jobs.jobs WHERE id = $1`, [never.id]);
      return row.settle_after === null;
    }, 20_000);
    const [still] = await db().query(`SELECT state FROM template_jobs.job_recipients WHERE job_id = $1 AND state <> 'pending'`, [never.id]);
    expect(still.state).to.equal("sending");
    expect((await getJob(h, org, never.id)).sent).to.equal(0);
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("a 130429 slows the channel and loses nobody: pending sends are finished by message.sent events", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(6);
    h.sim.setMode({ kind: "error", httpStatus: 429, code: 130429, message: "throughput", times: 3, phoneNumberId: channel.providerPhoneNumberId });
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    const done = await waitForJob(h, org, job.id, "completed", 60_000);
    expect(done).to.include({ sent: 6, failed: 0 });
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("a recipient left `waiting` whose event never came is settled from messaging's outcome: the job completes, nobody sent again", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(3);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    expect(await waitForJob(h, org, job.id, "completed")).to.include({ sent: 3 });
    // As if messaging had answered `pending` for one of them and its `message.sent` had gone astray, an hour ago.
    await db().query(
      `UPDATE template_jobs.job_recipients SET state = 'waiting', updated_at = now() - interval '1 hour' WHERE job_id = $1 AND seq = 1`,
      [job.id],
    );
    await db().query(
      `UPDATE template_jobs.jobs SET status = 'running', sent = sent - 1, completed_at = NULL, run_after = NULL, lease_owner = NULL, lease_until = NULL
       WHERE id = $1`,
      [job.id],
    );
    expect(await getJob(h, org, job.id)).to.include({ status: "running", sent: 2 });
    const done = await waitForJob(h, org, job.id, "completed");
    expect(done).to.include({ sent: 3, failed: 0, skipped: 0 });
    expect(done.completedAt).to.be.a("string");
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("counts permanent provider refusals as failed, once, and still completes", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(4);
    h.sim.setMode({ kind: "error", httpStatus: 400, code: 132001, message: "Template name does not exist in the translation", times: 2, phoneNumberId: channel.providerPhoneNumberId });
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
    const done = await waitForJob(h, org, job.id, "completed", 30_000);
    expect(done).to.include({ sent: 2, failed: 2, skipped: 0 });
    expect(list.map((p) => templateRequestsTo(h, p).length)).to.deep.equal([1, 1, 1, 1]);
    await eventually(() => eventsOf(h, "message.failed", (d) => d.templateJobId === job.id).length === 2);
  });

  it("several replicas never run one job twice", async () => {
    const other = await h.startReplica();
    try {
      const { org, channel, template } = await setup(h);
      const list = phones(150);
      const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list) });
      const second = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(phones(50)) });
      await waitForJob(h, org, job.id, "completed", 60_000);
      await waitForJob(h, org, second.id, "completed", 60_000);
      for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
      const digits = new Set(list.map(toProviderDigits));
      expect(h.sim.requests.filter((r) => digits.has((r.body as { to: string }).to)).length).to.equal(150);
    } finally {
      await other.stop();
    }
  });

  it("a job interrupted mid-run (service restarted) resumes and sends nobody twice nor skips anyone", async () => {
    const { org, channel, template } = await setup(h);
    const list = phones(25);
    const job = await createJob(org, { templateId: template.id, messagingChannelId: channel.id, recipients: recipients(list), throttlePerHour: 36_000 });
    await eventually(async () => (await getJob(h, org, job.id)).sent >= 5, 20_000);
    await h.restart();
    const done = await waitForJob(h, org, job.id, "completed", 30_000);
    expect(done.sent).to.equal(25);
    for (const p of list) expect(sendsTo(h, p), p).to.equal(1);
  });

  it("numeric template id jobs and templates of other organizations stay apart", async () => {
    const a = await setup(h);
    const b = await createTemplate(h, a.org, { status: "approved", bodyParameterCount: 1 });
    const [p] = phones(1);
    const job = await createJob(a.org, { templateId: b.providerTemplateId, templateAccountId: TEMPLATE_ACCOUNT_ID, messagingChannelId: a.channel.id, recipients: recipients([p]) });
    const done = await waitForJob(h, a.org, job.id, "completed");
    expect(done).to.include({ templateId: b.id, sent: 1 });
    expect((templateRequestsTo(h, p)[0].body as any).template.name).to.equal(b.name);
  });
});
