import { expect } from "chai";
import { Client } from "pg";
import { MESSAGING_RPC } from "@platform/contracts";
import { newId } from "@platform/id";
import { eventually, setDatabaseOutage } from "@platform/testing";
import { api, createChannel, eventsOf, newOrg, providerRequestsFor, receiveInbound, startHarness, uniquePhone, type Harness } from "./helpers/harness";

/**
 * The provider accepts a send, then the database refuses its `sent` mark (a
 * Postgres restart terminates the connections). The accepted answer must be
 * kept and recorded once the database is back, never turned into a second
 * provider call. Status callbacks are off here, so nothing but our own record
 * can settle the message.
 */
describe("a database blip between the provider's acceptance and the sent mark", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await startHarness("msgblip", { PROVIDER_TIMEOUT_MS: "6000" }, { autoStatuses: false });
  });
  after(async function () {
    this.timeout(30_000);
    await setDatabaseOutage(h.env.databaseUrl, false).catch(() => undefined);
    await h.close();
  });
  afterEach(() => h.sim.setMode({ kind: "ok" }));

  const toDigits = (phone: string) => phone.slice(1);
  const requestsTo = (phone: string) => h.sim.requests.filter((r) => (r.body as { to?: string })?.to === toDigits(phone));

  async function messageRow(id: string): Promise<{ status: string; provider_message_id: string | null }> {
    const c = new Client({ connectionString: h.env.databaseUrl });
    await c.connect();
    try {
      return (await c.query(`SELECT status, provider_message_id FROM messaging.messages WHERE id = $1`, [id])).rows[0];
    } finally {
      await c.end();
    }
  }

  /** Holds the provider's answer until the database is refused, so the answer meets a dead database. */
  async function outageWhileProviderAnswers(phone: string, started: Promise<unknown>): Promise<void> {
    await eventually(() => requestsTo(phone).length > 0, 10_000, 10);
    await setDatabaseOutage(h.env.databaseUrl, true);
    try {
      await started;
      // The provider answered while the database was away.
      expect(requestsTo(phone).map((r) => r.responseStatus)).to.deep.equal([200]);
    } finally {
      await setDatabaseOutage(h.env.databaseUrl, false);
    }
  }

  it("single send: exactly one provider request; the message ends sent with one message.sent", async function () {
    this.timeout(60_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    h.sim.setMode({ kind: "slow", delayMs: 2_000, times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const answer = api(h, org).post("/api/v1/messages").send({ to: phone, text: "blip" }).then((r) => r);
    await outageWhileProviderAnswers(phone, answer);
    const res = await answer;
    expect(res.status).to.equal(200);
    const wamid = requestsTo(phone)[0].providerMessageId;

    const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)[0], 30_000);
    expect(providerRequestsFor(h, res.body.id)).to.have.length(1);
    expect(sent.data.providerMessageId).to.equal(wamid);
    expect(await messageRow(res.body.id)).to.deep.equal({ status: "sent", provider_message_id: wamid });
    expect(eventsOf(h, "message.sent", (d) => d.messageId === res.body.id)).to.have.length(1);
    // The client was told the provider's id at once.
    expect(res.body.providerMessageId).to.equal(wamid);
  });

  it("template send: answered sent with the provider's id, recorded when the database is back, never sent twice", async function () {
    this.timeout(60_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    const jobId = newId("job");
    h.sim.setMode({ kind: "slow", delayMs: 2_000, times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const answer = h.bus.request(
      MESSAGING_RPC.sendTemplates,
      {
        organizationId: org,
        messagingChannelId: channel.id,
        templateJobId: jobId,
        template: { name: "promo", language: "en_US" },
        sends: [{ key: `job:${jobId}:r1`, phone }],
      },
      { timeoutMs: 20_000 },
    );
    await outageWhileProviderAnswers(phone, answer);
    const [result] = (await answer).results;
    const wamid = requestsTo(phone)[0].providerMessageId;

    const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === result.messageId)[0], 30_000);
    expect(providerRequestsFor(h, result.messageId!)).to.have.length(1);
    expect(sent.data.templateJobId).to.equal(jobId);
    expect(await messageRow(result.messageId!)).to.deep.equal({ status: "sent", provider_message_id: wamid });
    expect(result).to.include({ outcome: "sent", providerMessageId: wamid });
  });
});
