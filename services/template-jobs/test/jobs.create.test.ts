import { gzipSync } from "node:zlib";
import { expect } from "chai";
import { api, createTemplate, getJob, newOrg, recipients, setup, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

/** Sends bytes as they are: superagent would JSON-serialize a Buffer sent with a JSON content type. */
const raw = (bytes: Buffer) => bytes as unknown as string;

describe("POST /api/v1/templates/send: creation, validation, idempotency; GET and cancel", function () {
  this.timeout(60_000);
  let h: Harness;
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarness();
  });

  const farFuture = () => new Date(Date.now() + 3_600_000).toISOString();

  it("creates a job (200 {id, status, templateId, scheduledFor}) by internal template id", async () => {
    const { org, channel, template } = await setup(h);
    const res = await api(h, org).post("/api/v1/templates/send").send({ templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture() });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.include({ status: "queued", templateId: template.id, recipients: 1, sent: 0, failed: 0, skipped: 0, startedAt: null, completedAt: null });
    expect(res.body.id).to.match(/^job_/);
    expect(Date.parse(res.body.scheduledFor)).to.be.greaterThan(Date.now());
  });

  it("reads scheduledAt as service-spec.md's date inputs: date-only is 00:00:00.000Z of that day, a date-time without an offset is UTC", async () => {
    const { org, channel, template } = await setup(h);
    const year = new Date().getUTCFullYear() + 2;
    for (const [scheduledAt, scheduledFor] of [
      [`${year}-03-01`, `${year}-03-01T00:00:00.000Z`],
      [`${year}-03-01T10:30:00`, `${year}-03-01T10:30:00.000Z`],
      [`${year}-03-01T10:30:00+02:00`, `${year}-03-01T08:30:00.000Z`],
    ]) {
      const res = await api(h, org).post("/api/v1/templates/send").send({ templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.scheduledFor, scheduledAt).to.equal(scheduledFor);
    }
    // null is absent, as the job answers it: no schedule, no throttle, no header media.
    const nulls = await api(h, org).post("/api/v1/templates/send").send({
      templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt: null, throttlePerHour: null, headerMedia: null,
    });
    expect(nulls.status, JSON.stringify(nulls.body)).to.equal(200);
    expect(nulls.body).to.include({ scheduledFor: null });
    // An impossible day, and an offset that moves the instant into year 10000 (no ISO 8601 UTC form to answer with).
    for (const scheduledAt of [`${year}-02-30`, "9999-12-31T23:59:59-05:00"]) {
      const bad = await api(h, org).post("/api/v1/templates/send").send({ templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt });
      expect(bad.status, scheduledAt).to.equal(400);
      expect(bad.body.error.details[0].path).to.equal("scheduledAt");
    }
  });

  it("accepts the provider's numeric template id with templateAccountId; without it 400, with another account 404", async () => {
    const { org, channel, template } = await setup(h);
    const body = { templateId: template.providerTemplateId, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture() };
    const ok = await api(h, org).post("/api/v1/templates/send").send({ ...body, templateAccountId: template.templateAccountId });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.body.templateId).to.equal(template.id);
    const missing = await api(h, org).post("/api/v1/templates/send").send(body);
    expect(missing.status).to.equal(400);
    expect(missing.body.error.details[0].path).to.equal("templateAccountId");
    const wrong = await api(h, org).post("/api/v1/templates/send").send({ ...body, templateAccountId: "someone_else" });
    expect(wrong.status).to.equal(404);
    expect(wrong.body.error.code).to.equal("TEMPLATE_NOT_FOUND");
  });

  it("answers 404 TEMPLATE_NOT_FOUND / CHANNEL_NOT_FOUND (also for another organization's) and 403 TEMPLATE_NOT_APPROVED", async () => {
    const a = await setup(h);
    const b = await setup(h);
    const send = (org: string, templateId: string, channelId: string) =>
      api(h, org).post("/api/v1/templates/send").send({ templateId, messagingChannelId: channelId, recipients: recipients([uniquePhone()]) });
    expect((await send(a.org, "tpl_01jd0000000000000000000000", a.channel.id)).body.error.code).to.equal("TEMPLATE_NOT_FOUND");
    const crossTemplate = await send(a.org, b.template.id, a.channel.id);
    expect(crossTemplate.status).to.equal(404);
    expect(crossTemplate.body.error.code).to.equal("TEMPLATE_NOT_FOUND");
    const crossChannel = await send(a.org, a.template.id, b.channel.id);
    expect(crossChannel.status).to.equal(404);
    expect(crossChannel.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    for (const status of ["pending", "paused", "rejected", "disabled"]) {
      const t = await createTemplate(h, a.org, { status });
      const res = await send(a.org, t.id, a.channel.id);
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal("TEMPLATE_NOT_APPROVED");
    }
  });

  it("validates every field: recipient index in details, phones normalized, limits", async () => {
    const { org, channel, template } = await setup(h, { bodyParameterCount: 2 });
    const post = (body: Record<string, unknown>) => api(h, org).post("/api/v1/templates/send").send({ templateId: template.id, messagingChannelId: channel.id, ...body });
    const count = await post({ recipients: [...recipients([uniquePhone()], 2), ...recipients([uniquePhone()], 1)] });
    expect(count.status).to.equal(400);
    expect(count.body.error.code).to.equal("VALIDATION_ERROR");
    expect(count.body.error.details.map((d: { path: string }) => d.path)).to.deep.equal(["recipients.1.bodyParameters"]);
    const phone = await post({ recipients: [...recipients([uniquePhone()], 2), { phone: "12", bodyParameters: ["a", "b"] }, { phone: "+1 555 CALL NOW", bodyParameters: ["a", "b"] }] });
    expect(phone.status).to.equal(400);
    expect(phone.body.error.details.map((d: { path: string }) => d.path)).to.deep.equal(["recipients.1.phone", "recipients.2.phone"]);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ recipients: [] }, "recipients"],
      [{ recipients: [{ phone: uniquePhone(), bodyParameters: Array(21).fill("x") }] }, "recipients.0.bodyParameters"],
      [{ recipients: [{ phone: uniquePhone(), bodyParameters: ["a", ""] }] }, "recipients.0.bodyParameters.1"],
      [{ recipients: [{ phone: uniquePhone(), bodyParameters: ["a", "b"], buttonParameters: [{ type: "call" }] }] }, "recipients.0.buttonParameters.0.type"],
      [{ recipients: recipients([uniquePhone()], 2), throttlePerHour: 0 }, "throttlePerHour"],
      [{ recipients: recipients([uniquePhone()], 2), throttlePerHour: 100_001 }, "throttlePerHour"],
      [{ recipients: recipients([uniquePhone()], 2), scheduledAt: "tomorrow" }, "scheduledAt"],
      [{ recipients: recipients([uniquePhone()], 2), headerMedia: { url: "x".repeat(4001) } }, "headerMedia.url"],
      [{ recipients: recipients([uniquePhone()], 2), headerMedia: { url: "https://x/y.pdf", fileName: "f".repeat(241) } }, "headerMedia.fileName"],
    ];
    for (const [body, path] of cases) {
      const res = await post(body);
      expect(res.status, path).to.equal(400);
      expect(res.body.error.details.map((d: { path: string }) => d.path), path).to.include(path);
    }
    // "public URL": the provider fetches it, so no local, private or metadata address (IP literals in any spelling).
    const local = ["http://localhost/a.png", "https://media.localhost/a.png", "http://127.0.0.1/a.png", "http://0x7f.1/a.png", "http://10.0.0.1/a.png", "http://[::1]/a.png", "http://[::ffff:192.168.0.1]/a.png", "http://169.254.169.254/latest/meta-data", "http://metadata.google.internal/x"];
    for (const url of local) {
      const res = await post({ recipients: recipients([uniquePhone()], 2), headerMedia: { url } });
      expect([res.status, res.body.error?.details?.[0]?.path], url).to.deep.equal([400, "headerMedia.url"]);
      expect(res.body.error.details[0].message, url).to.match(/^must be a public URL, not a /);
    }
    for (const url of ["https://cdn.example.com/a.png", "http://93.184.216.34/a.png", "https://[2606:4700::1111]/a.png"]) {
      expect((await post({ recipients: recipients([uniquePhone()], 2), headerMedia: { url } })).status, url).to.equal(200);
    }
    const tooMany = await post({ recipients: Array.from({ length: 50_001 }, () => ({ phone: "+14155550100", bodyParameters: ["a", "b"] })) });
    expect(tooMany.status).to.equal(400);
    expect(tooMany.body.error.details[0].path).to.equal("recipients");
    const notJson = await api(h, org).post("/api/v1/templates/send").set("content-type", "application/json").send("{nope");
    expect(notJson.status).to.equal(400);
    expect(notJson.body.error.code).to.equal("INVALID_JSON");
  });

  it("takes 50,000 recipients in one request, stores them all (normalized), and refuses bodies over 16 MB (413)", async function () {
    this.timeout(120_000);
    const { org, channel, template } = await setup(h);
    const many = Array.from({ length: 50_000 }, (_, i) => ({ phone: `+1 (415) ${String(2_000_000 + i).slice(0, 3)}-${String(2_000_000 + i).slice(3)}`, bodyParameters: [`n${i}`] }));
    const res = await api(h, org).post("/api/v1/templates/send").send({ templateId: template.id, messagingChannelId: channel.id, recipients: many, scheduledAt: farFuture() });
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).to.equal(200);
    expect(res.body.recipients).to.equal(50_000);
    const rows = await h.svc.deps.db.query(`SELECT count(*)::int AS n, min(seq) AS lo, max(seq) AS hi, count(*) FILTER (WHERE phone !~ '^\\+1415\\d{7}$')::int AS bad FROM template_jobs.job_recipients WHERE job_id = $1`, [res.body.id]);
    expect(rows[0]).to.deep.equal({ n: 50_000, lo: 0, hi: 49_999, bad: 0 });
    const [first] = await h.svc.deps.db.query(`SELECT phone, body_parameters FROM template_jobs.job_recipients WHERE job_id = $1 AND seq = 1`, [res.body.id]);
    expect(first).to.deep.equal({ phone: "+14152000001", body_parameters: ["n1"] });

    const huge = JSON.stringify({ templateId: template.id, messagingChannelId: channel.id, recipients: [{ phone: uniquePhone(), bodyParameters: ["x".repeat(17 * 1024 * 1024)] }] });
    const big = await api(h, org).post("/api/v1/templates/send").set("content-type", "application/json").send(huge);
    expect(big.status).to.equal(413);
    expect(big.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
    const elsewhere = await api(h, org).post(`/admin/v1/organizations/${org}/templates`).set("content-type", "application/json").send(JSON.stringify({ name: "x".repeat(1_100_000) }));
    expect(elsewhere.status).to.equal(413);
    // The limit is the inflated body's: 3 MB gzipped to a few KB is still over 1 MB, on every route but /templates/send.
    const inflated = gzipSync(JSON.stringify({ name: "x".repeat(3_000_000) }));
    for (const [method, path] of [["post", `/admin/v1/organizations/${org}/templates`], ["patch", `/admin/v1/organizations/${org}/templates/${template.id}`], ["post", `/api/v1/templates/send/${res.body.id}/cancel`]] as const) {
      const zipped = await api(h, org)[method](path).set("content-type", "application/json").set("content-encoding", "gzip").serialize(raw).send(inflated);
      expect([zipped.status, zipped.body.error?.code], path).to.deep.equal([413, "PAYLOAD_TOO_LARGE"]);
    }
  });

  it("Idempotency-Key: same body → first answer with Idempotent-Replayed; other body → 422; keys are per organization", async () => {
    const { org, channel, template } = await setup(h);
    const body = { templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone(), uniquePhone()]), scheduledAt: farFuture() };
    const first = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-1").send(body);
    expect(first.status).to.equal(200);
    expect(first.headers["idempotent-replayed"]).to.equal(undefined);
    const again = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-1").send({ recipients: body.recipients, scheduledAt: body.scheduledAt, messagingChannelId: body.messagingChannelId, templateId: body.templateId });
    expect(again.status).to.equal(200);
    expect(again.headers["idempotent-replayed"]).to.equal("true");
    // The first answer again, byte for byte (key order included).
    expect(again.text).to.equal(first.text);
    const count = await h.svc.deps.db.query(`SELECT count(*)::int AS n FROM template_jobs.jobs WHERE organization_id = $1`, [org]);
    expect(count[0].n).to.equal(1);
    const other = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-1").send({ ...body, throttlePerHour: 5 });
    expect(other.status).to.equal(422);
    expect(other.body.error.code).to.equal("IDEMPOTENCY_KEY_REUSED");
    // A refused request is answered the same way again too.
    const bad1 = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-bad").send({ ...body, templateId: "tpl_missing" });
    const bad2 = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-bad").send({ ...body, templateId: "tpl_missing" });
    expect([bad1.status, bad2.status]).to.deep.equal([404, 404]);
    expect(bad2.headers["idempotent-replayed"]).to.equal("true");
    // Another organization's same key is its own.
    const b = await setup(h);
    const theirs = await api(h, b.org).post("/api/v1/templates/send").set("Idempotency-Key", "k-1").send({ ...body, templateId: b.template.id, messagingChannelId: b.channel.id });
    expect(theirs.status).to.equal(200);
    expect(theirs.headers["idempotent-replayed"]).to.equal(undefined);
    expect((await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "").send(body)).status).to.equal(400);
  });

  it("Idempotency-Key: a key's first answer stands whatever the plan is now; a first 402 is kept and replayed", async () => {
    const { org, channel, template } = await setup(h);
    const body = { templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture() };
    const first = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-plan").send(body);
    expect(first.status).to.equal(200);
    // The gateway marks a keyed request the plan no longer covers; the key's first answer comes back.
    const lapsed = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-plan").set("x-plan-refused", "1").send(body);
    expect([lapsed.status, lapsed.headers["idempotent-replayed"], lapsed.text]).to.deep.equal([200, "true", first.text]);
    const refused = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-plan-402").set("x-plan-refused", "1").send(body);
    expect([refused.status, refused.body.error?.code]).to.deep.equal([402, "PAYMENT_REQUIRED"]);
    const renewed = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-plan-402").send(body);
    expect([renewed.status, renewed.headers["idempotent-replayed"], renewed.body.error?.code]).to.deep.equal([402, "true", "PAYMENT_REQUIRED"]);
    const count = await h.svc.deps.db.query(`SELECT count(*)::int AS n FROM template_jobs.jobs WHERE organization_id = $1`, [org]);
    expect(count[0].n).to.equal(1);
  });

  it("a job commits with its Idempotency-Key's answer (no window for a second job); an abandoned claim is taken over after 30 s", async () => {
    const { org, channel, template } = await setup(h);
    const body = { templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture() };
    const first = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-tx").send(body);
    expect(first.status).to.equal(200);
    // Same transaction: the job row and the key's answer carry one transaction id, so a process dying after the
    // job's commit leaves a replayable answer, never a 'processing' claim whose takeover would create a second job.
    const [job] = await h.svc.deps.db.query(`SELECT xmin::text AS tx FROM template_jobs.jobs WHERE id = $1`, [first.body.id]);
    const [key] = await h.svc.deps.db.query(`SELECT xmin::text AS tx, state, response_body->>'id' AS id FROM template_jobs.idempotency_keys WHERE organization_id = $1 AND key = 'k-tx'`, [org]);
    expect(key).to.deep.equal({ tx: job.tx, state: "done", id: first.body.id });
    // A request that died before its job committed left its claim 'processing': a retry 30 s later creates the job once.
    await h.svc.deps.db.query(
      `UPDATE template_jobs.idempotency_keys SET state = 'processing', response_status = NULL, response_body = NULL, key = 'k-dead',
         created_at = clock_timestamp() - interval '31 seconds' WHERE organization_id = $1 AND key = 'k-tx'`,
      [org],
    );
    const retry = await api(h, org).post("/api/v1/templates/send").set("Idempotency-Key", "k-dead").send(body);
    expect(retry.status).to.equal(200);
    expect(retry.headers["idempotent-replayed"]).to.equal(undefined);
  });

  it("GET returns the job with progress; cancel cancels, and answers a final job unchanged; other organizations get 404", async () => {
    const { org, channel, template } = await setup(h);
    const created = await api(h, org).post("/api/v1/templates/send").send({ templateId: template.id, messagingChannelId: channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture(), throttlePerHour: 10 });
    const job = await getJob(h, org, created.body.id);
    expect(job).to.include({ id: created.body.id, status: "queued", recipients: 1, sent: 0, failed: 0, skipped: 0, throttlePerHour: 10 });
    const intruder = newOrg();
    expect((await api(h, intruder).get(`/api/v1/templates/send/${job.id}`)).status).to.equal(404);
    const theirCancel = await api(h, intruder).post(`/api/v1/templates/send/${job.id}/cancel`);
    expect(theirCancel.status).to.equal(404);
    expect(theirCancel.body.error.code).to.equal("NOT_FOUND");
    const cancelled = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
    expect(cancelled.status).to.equal(200);
    expect(cancelled.body.status).to.equal("cancelled");
    expect(cancelled.body.completedAt).to.be.a("string");
    const again = await api(h, org).post(`/api/v1/templates/send/${job.id}/cancel`);
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(cancelled.body);
    expect((await api(h, org).get("/api/v1/templates/send/job_nope")).status).to.equal(404);
  });
});
