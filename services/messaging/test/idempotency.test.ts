import { expect } from "chai";
import { eventually } from "@platform/testing";
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
    return { org, phone };
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
    expect(again.body).to.deep.equal(first.body);
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

  it("422 IDEMPOTENCY_KEY_REUSED for another body", async () => {
    const { org, phone } = await ready();
    const key = `k-reuse-${Date.now()}`;
    expect((await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "a" })).status).to.equal(200);
    const res = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "b" });
    expect(res.status).to.equal(422);
    expect(res.body.error.code).to.equal("IDEMPOTENCY_KEY_REUSED");
  });

  it("409 IDEMPOTENCY_KEY_IN_USE while the first request is still running", async () => {
    const { org, phone } = await ready();
    const key = `k-busy-${Date.now()}`;
    // The provider holds the first send's answer (just under the client's 1.5 s timeout; 200 either way).
    h.sim.setMode({ kind: "slow", delayMs: 1_400, times: 1 });
    const first = api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "slow" }).then((r) => r);
    // Once the first request is at the provider it holds the key (no fixed sleep guessing when that is).
    await eventually(() => h.sim.requests.some((r) => JSON.stringify(r.body).includes(phone.slice(1))), 10_000, 10);
    const second = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", key).send({ to: phone, text: "slow" });
    expect(second.status).to.equal(409);
    expect(second.body.error.code).to.equal("IDEMPOTENCY_KEY_IN_USE");
    expect((await first).status).to.equal(200);
  });

  it("validates the key: over 255 characters is 400", async () => {
    const org = newOrg();
    const long = await api(h, org).post("/api/v1/messages").set("Idempotency-Key", "k".repeat(256)).send({ to: "+14155550100", text: "x" });
    expect(long.status).to.equal(400);
    expect(long.body.error.code).to.equal("VALIDATION_ERROR");
  });
});
