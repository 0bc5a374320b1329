/**
 * The fault test (issue 10): a 5,000-recipient job whose template-jobs process
 * is killed (SIGKILL) twice mid-run and whose Postgres connections are cut once
 * completes with every recipient sent exactly once, counted by the provider
 * simulator's recorded requests per recipient.
 *
 * The whole stack runs as under `npm start` (every service its own process,
 * restarted by the supervisor). Slow (about a minute): `npm run test:fault -w services/template-jobs`.
 */
import { expect } from "chai";
import { Client } from "pg";
import { freePort, startStack, type Stack } from "@platform/stack";
import { createTestEnvironment, eventually, type TestEnvironment } from "@platform/testing";

const RECIPIENTS = 5_000;

describe("fault: template jobs through kills of their runner and a Postgres connection cut", function () {
  this.timeout(600_000);
  let env: TestEnvironment;
  let stack: Stack;
  const logs: string[] = [];

  before(async function () {
    env = await createTestEnvironment("tjfault");
    stack = await startStack({
      port: await freePort(),
      databaseUrl: env.databaseUrl,
      natsUrl: env.natsUrl,
      namespace: env.namespace,
      // A killed replica's lease is taken over after 3 s instead of 30 s.
      env: { LOG_LEVEL: "warn", JOB_LEASE_MS: "3000", JOB_POLL_MS: "100" },
      onLog: (line) => {
        logs.push(line);
        if (process.env.FAULT_VERBOSE) process.stdout.write(line + "\n");
      },
    });
    await stack.waitReady(120_000);
  });
  after(async function () {
    await stack?.stop();
    await env?.cleanup();
  });

  async function call(method: string, path: string, token: string, body?: unknown) {
    const res = await fetch(stack.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  it("sends each of the 5,000 recipients exactly once", async () => {
    const admin = stack.adminToken;
    const org = (await call("POST", "/admin/v1/organizations", admin, { name: "fault" })).body.id as string;
    const key = (await call("POST", `/admin/v1/organizations/${org}/api-keys`, admin, { name: "k" })).body.key as string;
    const pnid = `fault-${env.namespace}`;
    // 100 msg/s: the job takes about 50 s, long enough to be interrupted three times.
    const channel = (await call("POST", `/admin/v1/organizations/${org}/channels`, admin, { name: "c", phoneNumber: "+14155550100", providerPhoneNumberId: pnid, messagesPerSecond: 100 })).body;
    const template = (await call("POST", `/admin/v1/organizations/${org}/templates`, admin, {
      name: "fault", language: "en_US", status: "approved", bodyParameterCount: 1, providerTemplateId: "777", templateAccountId: "waba_fault",
    })).body;
    const phones = Array.from({ length: RECIPIENTS }, (_, i) => `+1415${String(5_000_000 + i)}`);
    const created = await call("POST", "/api/v1/templates/send", key, {
      templateId: template.id, messagingChannelId: channel.id, recipients: phones.map((phone, i) => ({ phone, bodyParameters: [`r${i}`] })),
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    const jobId = created.body.id as string;
    const progress = async () => (await call("GET", `/api/v1/templates/send/${jobId}`, key)).body as { status: string; sent: number; failed: number; skipped: number };

    const killAt = async (sent: number) => {
      await eventually(async () => (await progress()).sent >= sent, 120_000, 100);
      const restartsBefore = stack.restarts("template-jobs");
      stack.kill("template-jobs", "SIGKILL");
      await eventually(() => stack.restarts("template-jobs") > restartsBefore, 10_000);
    };
    await killAt(800);
    await killAt(2_000);

    // Cut every Postgres connection of template-jobs once, mid-run.
    await eventually(async () => (await progress()).sent >= 3_200, 120_000, 100);
    const pg = new Client({ connectionString: env.databaseUrl });
    await pg.connect();
    try {
      const { rows } = await pg.query(
        `SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'template-jobs'`,
      );
      expect(rows.length).to.be.greaterThan(0);
    } finally {
      await pg.end();
    }

    const done = await eventually(async () => {
      const p = await progress();
      return p.status === "completed" ? p : undefined;
    }, 240_000, 500);
    expect(done).to.include({ sent: RECIPIENTS, failed: 0, skipped: 0 });

    const { requests } = (await (await fetch(`${stack.simulatorUrl}/_sim/requests`)).json()) as { requests: Array<{ phoneNumberId: string; responseStatus: number; body: { to: string } }> };
    const perRecipient = new Map<string, number>();
    for (const r of requests) {
      if (r.phoneNumberId === pnid && r.responseStatus === 200) perRecipient.set(r.body.to, (perRecipient.get(r.body.to) ?? 0) + 1);
    }
    const twice = [...perRecipient].filter(([, n]) => n > 1);
    const missing = phones.filter((p) => !perRecipient.has(p.slice(1)));
    expect(twice, `sent more than once: ${twice.slice(0, 5).join(" ")}`).to.have.length(0);
    expect(missing, `never sent: ${missing.slice(0, 5).join(" ")}`).to.have.length(0);
    expect(perRecipient.size).to.equal(RECIPIENTS);
    expect(stack.restarts("template-jobs")).to.equal(2);
  });

  it("a job cancelled right after its runner was killed counts every send the provider accepted (ADR 0018)", async () => {
    const admin = stack.adminToken;
    const org = (await call("POST", "/admin/v1/organizations", admin, { name: "fault-cancel" })).body.id as string;
    const key = (await call("POST", `/admin/v1/organizations/${org}/api-keys`, admin, { name: "k" })).body.key as string;
    const pnid = `fault-cancel-${env.namespace}`;
    const channel = (await call("POST", `/admin/v1/organizations/${org}/channels`, admin, { name: "c", phoneNumber: "+14155550100", providerPhoneNumberId: pnid, messagesPerSecond: 100 })).body;
    const template = (await call("POST", `/admin/v1/organizations/${org}/templates`, admin, {
      name: "fault_cancel", language: "en_US", status: "approved", bodyParameterCount: 1, providerTemplateId: "778", templateAccountId: "waba_fault",
    })).body;
    const phones = Array.from({ length: 1_000 }, (_, i) => `+1415${String(6_000_000 + i)}`);
    const created = await call("POST", "/api/v1/templates/send", key, {
      templateId: template.id, messagingChannelId: channel.id, recipients: phones.map((phone, i) => ({ phone, bodyParameters: [`r${i}`] })),
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    const jobId = created.body.id as string;
    const progress = async () => (await call("GET", `/api/v1/templates/send/${jobId}`, key)).body as { status: string; sent: number };
    await eventually(async () => (await progress()).sent >= 150, 120_000, 50);

    // Killed with batches in messaging's hands: messaging sends them, the dead run never records them.
    const restartsBefore = stack.restarts("template-jobs");
    stack.kill("template-jobs", "SIGKILL");
    await eventually(() => stack.restarts("template-jobs") > restartsBefore, 10_000);
    const cancelled = await eventually(async () => {
      const res = await call("POST", `/api/v1/templates/send/${jobId}/cancel`, key);
      return res.status === 200 ? res.body : undefined;
    }, 30_000, 100);
    expect(cancelled.status).to.equal("cancelled");

    const accepted = async () => {
      const { requests } = (await (await fetch(`${stack.simulatorUrl}/_sim/requests`)).json()) as { requests: Array<{ phoneNumberId: string; responseStatus: number }> };
      return requests.filter((r) => r.phoneNumberId === pnid && r.responseStatus === 200).length;
    };
    // Once the dead run's lease is over, the settling sweep records what messaging sent for it.
    const settled = await eventually(async () => {
      const [p, n] = await Promise.all([progress(), accepted()]);
      return p.sent === n ? p : undefined;
    }, 60_000, 200);
    expect(settled.status).to.equal("cancelled");
    expect(settled.sent).to.be.below(phones.length);
    expect(await accepted()).to.equal(settled.sent);
  });
});
