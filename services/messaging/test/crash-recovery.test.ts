import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { Client } from "pg";
import request from "supertest";
import { startService } from "@platform/service";
import { eventually } from "@platform/testing";
import { definition } from "../src/service";
import { eventsOf, newOrg, providerRequestsFor, serviceEnv, startInfra, uniquePhone, uniquePhoneNumberId, type Infra } from "./helpers/harness";

/**
 * The service is killed (SIGKILL, no shutdown) after it stored a message and before it called the provider. After a
 * restart a send without a key is cancelled (its caller was told 503 and sends again, ADR 0025); one with a key is
 * sent exactly once, by the key's retry.
 * Runs the built service (`dist/index.js`) as a child process, like `npm start` does.
 */
describe("crash between storing and calling the provider", () => {
  let infra: Infra;
  let child: ChildProcess | undefined;
  before(async function () {
    this.timeout(60_000);
    infra = await startInfra("msgkill");
  });
  after(async function () {
    this.timeout(30_000);
    child?.kill("SIGKILL");
    await infra.close();
  });

  async function startChild(): Promise<string> {
    const entry = path.resolve(__dirname, "../dist/index.js");
    const proc = spawn(process.execPath, [entry], {
      env: { ...process.env, ...serviceEnv(infra.env, infra.sim.url, { LOG_LEVEL: "info" }) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = proc;
    return new Promise<string>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`child did not start: ${out.slice(-2000)}`)), 20_000);
      proc.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const m = /"port":(\d+).*"msg":"service listening"/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(`http://127.0.0.1:${m[1]}`);
        }
      });
      proc.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
      proc.once("exit", (code) => reject(new Error(`child exited ${code}: ${out.slice(-2000)}`)));
    });
  }

  /**
   * Starts the built service, opens a channel of one message per second and stores a second send (with `key`, or
   * none) that waits about a second for its pacing slot; kills the process (SIGKILL) there, before its provider call,
   * and starts the service again in this process. Returns the stored message's id, what the test needs to look on.
   */
  async function crashAfterStoring(key: string | undefined) {
    const url = await startChild();
    const org = newOrg();
    const headers = { "x-internal-token": infra.env.internalToken, "x-organization-id": org };
    const ch = await request(url)
      .post(`/admin/v1/organizations/${org}/channels`)
      .set(headers)
      .send({ name: "slow", phoneNumber: "+14155550100", providerPhoneNumberId: uniquePhoneNumberId(), messagesPerSecond: 1 });
    expect(ch.status).to.equal(201);
    const phone = uniquePhone();
    const wamid = await infra.sim.injectInbound({ phoneNumberId: ch.body.providerPhoneNumberId, from: phone, text: "hi" });
    await eventually(() => eventsOf(infra, "message.received", (d) => d.providerMessageId === wamid).length > 0);
    const first = await request(url).post("/api/v1/messages").set(headers).send({ to: phone, text: "first" });
    expect(first.status).to.equal(200);
    const body = { to: phone, text: `second ${key ?? "without a key"}` };
    void request(url).post("/api/v1/messages").set({ ...headers, ...(key ? { "Idempotency-Key": key } : {}) }).send(body).then(
      () => undefined,
      () => undefined,
    );
    const db = new Client({ connectionString: infra.env.databaseUrl });
    await db.connect();
    const stored = await eventually(async () => {
      const r = await db.query(`SELECT id FROM messaging.messages WHERE organization_id = $1 AND text = $2 AND status = 'pending'`, [org, body.text]);
      return r.rows[0]?.id as string | undefined;
    }, 5_000, 10);
    child!.kill("SIGKILL");
    await new Promise((r) => child!.once("exit", r));
    child = undefined;
    expect(providerRequestsFor(infra, stored), "not sent before the crash").to.have.length(0);
    // A lease the crash left is waited out as an unanswered call (PROVIDER_UNANSWERED_RETRY_MS past it), shortened here.
    const restarted = await startService(definition, serviceEnv(infra.env, infra.sim.url, { PROVIDER_UNANSWERED_RETRY_MS: "3000" }), { exitOnConfigError: false });
    const rowOf = async () => (await db.query(`SELECT status, error_code, provider_message_id FROM messaging.messages WHERE id = $1`, [stored])).rows[0];
    return { org, headers, body, stored, restarted, db, rowOf };
  }

  it("a send without a key whose request died before the provider call is cancelled after a restart, never sent: its caller was told 503", async function () {
    this.timeout(120_000);
    const { stored, restarted, db, rowOf } = await crashAfterStoring(undefined);
    try {
      // After PROVIDER_UNANSWERED_RETRY_MS, and once the status callbacks stored by then are applied: those the killed
      // process had taken come back after their ack wait (30 s), the sweep waits for them (CallbackWatermark).
      await eventually(async () => (await rowOf()).status === "cancelled", 75_000, 100);
      expect((await rowOf()).error_code).to.equal("request_abandoned");
      expect(providerRequestsFor(infra, stored)).to.have.length(0);
      expect(eventsOf(infra, "message.sent", (d) => d.messageId === stored)).to.have.length(0);
    } finally {
      await restarted.stop();
      await db.end();
    }
  });

  it("a send with a key whose request died is sent exactly once by the key's retry, also after the sweep cancelled it", async function () {
    this.timeout(120_000);
    const key = `crash-${Date.now()}`;
    const { org, headers, body, stored, restarted, db, rowOf } = await crashAfterStoring(key);
    try {
      // The sweep cannot tell a keyed send from a keyless one: it cancels it like any send whose request died.
      await eventually(async () => (await rowOf()).status === "cancelled", 75_000, 100);
      // The client retries with its key once the dead request's claim can be taken over (its age, moved here).
      await db.query(`UPDATE messaging.idempotency_keys SET created_at = clock_timestamp() - interval '31 seconds' WHERE organization_id = $1 AND key = $2`, [org, key]);
      const retry = await request(restarted.url).post("/api/v1/messages").set({ ...headers, "Idempotency-Key": key }).send(body);
      expect([retry.status, retry.body.id]).to.deep.equal([200, stored]);
      await eventually(() => eventsOf(infra, "message.sent", (d) => d.messageId === stored).length === 1, 20_000);
      expect(providerRequestsFor(infra, stored)).to.have.length(1);
      const row = await rowOf();
      expect(row.status).to.be.oneOf(["sent", "delivered", "read"]);
      expect(row.provider_message_id).to.match(/^wamid\./);
      // A second retry replays the answer; nothing more is sent.
      const replay = await request(restarted.url).post("/api/v1/messages").set({ ...headers, "Idempotency-Key": key }).send(body);
      expect([replay.status, replay.body.id, replay.headers["idempotent-replayed"]]).to.deep.equal([200, stored, "true"]);
      expect(providerRequestsFor(infra, stored)).to.have.length(1);
    } finally {
      await restarted.stop();
      await db.end();
    }
  });

  it("a send whose provider call a crash cut off waits as an unanswered one: the provider's late acceptance settles it, no second send", async function () {
    this.timeout(90_000);
    const url = await startChild();
    const org = newOrg();
    const headers = { "x-internal-token": infra.env.internalToken, "x-organization-id": org };
    const ch = await request(url)
      .post(`/admin/v1/organizations/${org}/channels`)
      .set(headers)
      .send({ name: "main", phoneNumber: "+14155550100", providerPhoneNumberId: uniquePhoneNumberId() });
    expect(ch.status).to.equal(201);
    const phone = uniquePhone();
    const wamid = await infra.sim.injectInbound({ phoneNumberId: ch.body.providerPhoneNumberId, from: phone, text: "hi" });
    await eventually(() => eventsOf(infra, "message.received", (d) => d.providerMessageId === wamid).length > 0);
    // The provider holds its answer 12 s: longer than the send's lease (5.5 s here) and its stalled-send grace, which
    // is when a dead sender's message was sent again before.
    infra.sim.setMode({ kind: "slow", delayMs: 12_000, times: 1, phoneNumberId: ch.body.providerPhoneNumberId });
    const db = new Client({ connectionString: infra.env.databaseUrl });
    await db.connect();
    try {
      void request(url).post("/api/v1/messages").set(headers).send({ to: phone, text: "cut off" }).then(
        () => undefined,
        () => undefined,
      );
      const stored = await eventually(async () => {
        const r = await db.query(`SELECT id FROM messaging.messages WHERE organization_id = $1 AND text = 'cut off'`, [org]);
        const id = r.rows[0]?.id as string | undefined;
        return id && providerRequestsFor(infra, id).length === 1 ? id : undefined;
      }, 10_000, 10);
      child!.kill("SIGKILL");
      await new Promise((r) => child!.once("exit", r));
      child = undefined;

      const restarted = await startService(definition, serviceEnv(infra.env, infra.sim.url), { exitOnConfigError: false });
      try {
        // The provider accepts the call it held, and its status callback (our id as callback data) settles the message.
        await eventually(() => eventsOf(infra, "message.sent", (d) => d.messageId === stored).length === 1, 40_000);
        expect(providerRequestsFor(infra, stored), "provider calls").to.have.length(1);
        const row = await db.query(`SELECT status FROM messaging.messages WHERE id = $1`, [stored]);
        expect(row.rows[0].status).to.be.oneOf(["sent", "delivered", "read"]);
      } finally {
        await restarted.stop();
      }
    } finally {
      infra.sim.setMode({ kind: "ok" });
      await db.end();
    }
  });
});
