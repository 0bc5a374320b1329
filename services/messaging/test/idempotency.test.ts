import { expect } from "chai";
import { eventually } from "@platform/testing";
import { requestHash } from "../src/use-cases/idempotency";
import { api, createChannel, newOrg, providerRequestsFor, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("Idempotency-Key on POST /api/v1/messages", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  async function ready() {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    return { org, channel, phone };
  }

  it("replays the first answer with Idempotent-Replayed: true and sends once", async () => {
    const { org, phone } = await ready();
    const key = `k-${Date.now()}`;
    const first = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "once" });
    expect(first.status).to.equal(200);
    expect(first.headers["idempotent-replayed"]).to.equal(undefined);
    // Same body, keys in another order.
    const again = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ text: "once", to: phone });
    expect(again.status).to.equal(200);
    expect(again.headers["idempotent-replayed"]).to.equal("true");
    // The first answer again, byte for byte (key order included).
    expect(again.text).to.equal(first.text);
    expect(providerRequestsFor(h, first.body.id)).to.have.length(1);
    expect(h.sim.requests.filter((r) => (r.body as { text?: { body: string } }).text?.body === "once" && (r.body as { to: string }).to === phone.slice(1))).to.have.length(1);

    // The key is scoped to the organization.
    const other = await ready();
    const elsewhere = await api(h, other.org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: other.phone, text: "once" });
    expect(elsewhere.status).to.equal(200);
    expect(elsewhere.headers["idempotent-replayed"]).to.equal(undefined);
  });

  it("replays an error answer too, status included", async () => {
    const org = newOrg();
    await createChannel(h, org);
    const key = `k-err-${Date.now()}`;
    const body = { to: uniquePhone(), text: "no window" };
    const first = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send(body);
    expect(first.status).to.equal(400);
    const again = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send(body);
    expect(again.status).to.equal(400);
    expect(again.headers["idempotent-replayed"]).to.equal("true");
    expect(again.body).to.deep.equal(first.body);
  });

  it("a key's first answer stands whatever the plan is now: a later refusal replays it, a first 402 is replayed too", async () => {
    const { org, phone } = await ready();
    const body = { to: phone, text: "plan" };
    const sent = `k-plan-${Date.now()}`;
    const first = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", sent).send(body);
    expect(first.status).to.equal(200);
    // The plan lapsed since: the gateway forwards the key's repeat marked as refused; its first answer comes back.
    const lapsed = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", sent).set("x-plan-refused", "1").send(body);
    expect([lapsed.status, lapsed.headers["idempotent-replayed"], lapsed.text]).to.deep.equal([200, "true", first.text]);

    // A new key while the plan does not cover it: 402, kept as the key's first answer; nothing sent.
    const refused = `k-plan-402-${Date.now()}`;
    const payment = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", refused).set("x-plan-refused", "1").send(body);
    expect([payment.status, payment.body.error?.code]).to.deep.equal([402, "PAYMENT_REQUIRED"]);
    const renewed = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", refused).send(body);
    expect([renewed.status, renewed.headers["idempotent-replayed"], renewed.body.error?.code]).to.deep.equal([402, "true", "PAYMENT_REQUIRED"]);
    expect(h.sim.requests.filter((r) => (r.body as { to: string }).to === phone.slice(1) && (r.body as { text?: { body: string } }).text?.body === "plan")).to.have.length(1);
  });

  it("422 IDEMPOTENCY_KEY_REUSED for another body", async () => {
    const { org, phone } = await ready();
    const key = `k-reuse-${Date.now()}`;
    expect((await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "a" })).status).to.equal(200);
    const res = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "b" });
    expect(res.status).to.equal(422);
    expect(res.body.error.code).to.equal("IDEMPOTENCY_KEY_REUSED");
  });

  it("409 IDEMPOTENCY_KEY_IN_USE while the first request is still running", async () => {
    const { org, channel, phone } = await ready();
    const key = `k-busy-${Date.now()}`;
    // The provider holds the first send's answer (just under the client's 1.5 s timeout; 200 either way).
    h.sim.setMode({ kind: "slow", delayMs: 1_400, times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const first = api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "slow" }).then((r) => r);
    // Once the first request is at the provider it holds the key (no fixed sleep guessing when that is).
    await eventually(() => h.sim.requests.some((r) => JSON.stringify(r.body).includes(phone.slice(1))), 10_000, 10);
    const second = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "slow" });
    expect(second.status).to.equal(409);
    expect(second.body.error.code).to.equal("IDEMPOTENCY_KEY_IN_USE");
    expect((await first).status).to.equal(200);
  });

  const db = () => (h.svc as unknown as { deps: { db: import("typeorm").DataSource } }).deps.db;
  /** What a request that died mid-way leaves behind: its claim `processing`, older than the takeover delay. */
  const abandon = (org: string, key: string) =>
    db().query(
      `UPDATE messaging.idempotency_keys SET state = 'processing', response_status = NULL, response_body = NULL,
         created_at = clock_timestamp() - interval '31 seconds' WHERE organization_id = $1 AND key = $2`,
      [org, key],
    );

  it("a retry after the first request died answers the message that request stored, never a second message", async () => {
    const { org, phone } = await ready();
    const key = `k-dead-${Date.now()}`;
    const text = `died after storing ${key}`;
    const first = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text });
    expect(first.status).to.equal(200);
    await abandon(org, key);
    const retry = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text });
    expect(retry.status).to.equal(200);
    expect(retry.body.id).to.equal(first.body.id);
    expect(retry.body.conversationId).to.equal(first.body.conversationId);
    const rows = await db().query(`SELECT id FROM messaging.messages WHERE organization_id = $1 AND text = $2`, [org, text]);
    expect(rows.map((r: { id: string }) => r.id)).to.deep.equal([first.body.id]);
    expect(providerRequestsFor(h, first.body.id)).to.have.length(1);
    // The takeover's answer is kept like any other: the next retry is a replay.
    const replay = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text });
    expect(replay.headers["idempotent-replayed"]).to.equal("true");
    expect(replay.body.id).to.equal(first.body.id);
  });

  it("a retry after the first request died before storing sends the message once, with the id the claim fixed", async () => {
    const { org, phone } = await ready();
    const key = `k-early-${Date.now()}`;
    const text = `died before storing ${key}`;
    await db().query(
      `INSERT INTO messaging.idempotency_keys (organization_id, key, request_hash, state, expires_at, message_id, created_at)
       VALUES ($1, $2, $3, 'processing', clock_timestamp() + interval '1 day', 'msg_claimedbeforedying0000000', clock_timestamp() - interval '31 seconds')`,
      [org, key, requestHash({ to: phone, text })],
    );
    const retry = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text });
    expect(retry.status).to.equal(200);
    expect(retry.body.id).to.equal("msg_claimedbeforedying0000000");
    await eventually(() => providerRequestsFor(h, retry.body.id).length === 1, 10_000);
    // A live claim (younger than the takeover delay) is still 409.
    const live = `k-live-${Date.now()}`;
    await db().query(
      `INSERT INTO messaging.idempotency_keys (organization_id, key, request_hash, state, expires_at, message_id)
       VALUES ($1, $2, $3, 'processing', clock_timestamp() + interval '1 day', 'msg_live00000000000000000000')`,
      [org, live, requestHash({ to: phone, text })],
    );
    const busy = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", live).send({ to: phone, text });
    expect([busy.status, busy.body.error.code]).to.deep.equal([409, "IDEMPOTENCY_KEY_IN_USE"]);
  });

  it("validates the key: over 255 characters is 400", async () => {
    const org = newOrg();
    const long = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", "k".repeat(256)).send({ to: "+14155550100", text: "x" });
    expect(long.status).to.equal(400);
    expect(long.body.error.code).to.equal("VALIDATION_ERROR");
  });
});
