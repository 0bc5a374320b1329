import { expect } from "chai";
import { Client } from "pg";
import { eventually } from "@platform/testing";
import type { SimMode } from "@platform/provider-simulator";
import { api, eventsOf, openWindow, providerRequestsFor, startHarness, type Harness } from "./helpers/harness";

/**
 * A provider call that gets no answer within PROVIDER_TIMEOUT_MS may still have been accepted. Its retry waits
 * PROVIDER_UNANSWERED_RETRY_MS, so the provider's status callback (carrying our message id) settles the message
 * first and the worker never sends it again. A 2xx without a message id is treated the same; an answered transient
 * failure (5xx) keeps the short backoff.
 */
describe("a provider call that gets no answer", () => {
  let h: Harness;
  const RETRY_MS = 4_000;
  before(async function () {
    this.timeout(60_000);
    h = await startHarness("msgunanswered", { PROVIDER_TIMEOUT_MS: "1000", PROVIDER_UNANSWERED_RETRY_MS: String(RETRY_MS) });
  });
  after(async function () {
    this.timeout(30_000);
    await h.close();
  });
  afterEach(() => h.sim.setMode({ kind: "ok" }));

  /** The message's row: status, the error of the last attempt and the delay chosen for the next one (database clock). */
  async function retryOf(id: string): Promise<{ status: string; error_code: string | null; delay_ms: number; due_at_ms: number; now_ms: number }> {
    const c = new Client({ connectionString: h.env.databaseUrl });
    await c.connect();
    try {
      const r = await c.query(
        `SELECT status, error_code, extract(epoch FROM next_attempt_at - updated_at) * 1000 AS delay_ms,
                extract(epoch FROM next_attempt_at) * 1000 AS due_at_ms, extract(epoch FROM clock_timestamp()) * 1000 AS now_ms
           FROM messaging.messages WHERE id = $1`,
        [id],
      );
      const row = r.rows[0];
      return { status: row.status, error_code: row.error_code, delay_ms: Number(row.delay_ms), due_at_ms: Number(row.due_at_ms), now_ms: Number(row.now_ms) };
    } finally {
      await c.end();
    }
  }

  /** Sends to a new conversation, whose channel's provider calls answer as `mode` says (the rest of the harness's are `ok`). */
  async function sendTo(mode: Exclude<SimMode, { kind: "ok" }>): Promise<{ org: string; id: string }> {
    const { org, channel, phone } = await openWindow(h);
    h.sim.setMode({ ...mode, phoneNumberId: channel.providerPhoneNumberId });
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "hello" });
    expect(res.status).to.equal(200);
    expect(res.body.providerMessageId).to.equal(null);
    return { org, id: res.body.id };
  }

  /**
   * The send's first call went unanswered (`code`): its retry is scheduled RETRY_MS out, the accepted request's callback
   * settles it first (sent once, with the provider's id), and the record no longer shows the attempt's error.
   */
  async function settledByTheCallback(code: string, mode: Exclude<SimMode, { kind: "ok" }>): Promise<void> {
    const { org, id } = await sendTo(mode);
    const decided = await retryOf(id);
    // Either the retry is scheduled RETRY_MS out, or the provider's callback already settled the message.
    if (decided.status === "pending") {
      expect(decided.error_code).to.equal(code);
      expect(decided.delay_ms).to.be.at.least(RETRY_MS - 10);
    }
    const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === id)[0], 30_000);
    expect(sent.data.providerMessageId).to.be.a("string");
    // Past the retry's due time (as first decided) the worker finds the message settled and does not call the
    // provider again. (A slow worker only makes this pass later, never fail: it is a "nothing happened" check.)
    const dueAt = decided.status === "pending" ? decided.due_at_ms : decided.now_ms;
    await eventually(async () => (await retryOf(id)).now_ms > dueAt + 1_000, 30_000, 100);
    expect(providerRequestsFor(h, id)).to.have.length(1);
    expect(eventsOf(h, "message.sent", (d) => d.messageId === id)).to.have.length(1);
    // The provider had it: the record shows no error of the attempt that went unanswered.
    const record = await api(h, org).get(`/api/v1/messages/${id}`);
    expect([record.status, record.body.error, record.body.providerMessageId]).to.deep.equal([200, null, sent.data.providerMessageId]);
    expect(record.body.status).to.be.oneOf(["sent", "delivered", "read"]);
  }

  it("waits for the provider's status callback instead of sending again after 1 s", async function () {
    this.timeout(60_000);
    // Answered after the 1 s timeout: accepted all the same.
    await settledByTheCallback("timeout", { kind: "slow", delayMs: 2_000, times: 1 });
  });

  it("waits the same after a 2xx without a message id: the provider most likely has the message", async function () {
    this.timeout(60_000);
    await settledByTheCallback("unreadable_success", { kind: "unreadable", times: 1 });
  });

  it("waits the same after a connection lost once the request went out: the provider may have taken it", async function () {
    this.timeout(60_000);
    await settledByTheCallback("connection_lost", { kind: "dropped", times: 1 });
  });

  it("the backoff doubles per failed attempt, not per attempt: deferrals (a template send's pacing slot) do not lengthen it", async function () {
    this.timeout(60_000);
    const { id } = await sendTo({ kind: "error", httpStatus: 503, code: 2, times: 2 });
    // As a busy channel's template send would be: many attempts deferred for a pacing slot, one failure.
    const c = new Client({ connectionString: h.env.databaseUrl });
    await c.connect();
    try {
      const bumped = await c.query(`UPDATE messaging.messages SET attempts = 23 WHERE id = $1 AND status = 'pending' AND attempts = 1 AND failures = 1`, [id]);
      expect(bumped.rowCount, "the first attempt failed once and is not retried yet").to.equal(1);
      // The retry fails too: its backoff is the second failure's (2 s), not attempt 24's (the 60 s cap).
      const second = await eventually(async () => {
        const r = await c.query(
          `SELECT failures, extract(epoch FROM next_attempt_at - updated_at) * 1000 AS delay_ms FROM messaging.messages WHERE id = $1 AND status = 'pending' AND failures = 2`,
          [id],
        );
        return r.rows[0] as { failures: number; delay_ms: string } | undefined;
      }, 30_000, 20);
      expect(Number(second.delay_ms)).to.be.within(1_990, 2_100);
    } finally {
      await c.end();
    }
    await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === id)[0], 30_000);
    expect(providerRequestsFor(h, id)).to.have.length(3);
  });

  it("an answered transient failure (503) keeps the short backoff", async function () {
    this.timeout(60_000);
    const { id } = await sendTo({ kind: "error", httpStatus: 503, code: 2, times: 1 });
    const decided = await retryOf(id);
    if (decided.status === "pending") {
      expect(decided.error_code).to.not.equal("timeout");
      expect(decided.delay_ms).to.be.below(RETRY_MS);
    }
    await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === id)[0], 30_000);
    expect(providerRequestsFor(h, id)).to.have.length(2);
  });
});

/**
 * A call unanswered at PROVIDER_TIMEOUT_MS is still read until 1 s before its retry is due: a provider that takes the
 * message and answers late has it, and its answer settles the send at once, with no status callback and no second call.
 */
describe("a provider call answered after its timeout", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    // No status callbacks: only the call's own late answer can settle the send. The retry is a minute out, so nothing
    // but that answer can either.
    h = await startHarness("msglateanswer", { PROVIDER_TIMEOUT_MS: "1000", PROVIDER_UNANSWERED_RETRY_MS: "60000" }, { autoStatuses: false });
  });
  after(async function () {
    this.timeout(30_000);
    await h.close();
  });
  afterEach(() => h.sim.setMode({ kind: "ok" }));

  it("is sent once, with the provider's id, when the late answer is an acceptance", async function () {
    this.timeout(60_000);
    const { org, channel, phone } = await openWindow(h);
    // The provider takes the message and holds its answer until the request has been answered without it.
    h.sim.setMode({ kind: "held", times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const res = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "answered late" });
    expect([res.status, res.body.providerMessageId]).to.deep.equal([200, null]);
    const [call] = providerRequestsFor(h, res.body.id);
    h.sim.release();

    const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)[0], 20_000);
    expect(sent.data.providerMessageId).to.equal(call.providerMessageId);
    const record = await api(h, org).get(`/api/v1/messages/${res.body.id}`);
    expect([record.body.status, record.body.providerMessageId, record.body.error]).to.deep.equal(["sent", call.providerMessageId, null]);
    expect(providerRequestsFor(h, res.body.id)).to.have.length(1);
    expect(eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)).to.have.length(1);
  });
});
