import { expect } from "chai";
import type { DataSource } from "typeorm";
import { RpcCallError } from "@platform/bus";
import { MessageRecord, MESSAGING_RPC, type TemplateSendRequest } from "@platform/contracts";
import { newId } from "@platform/id";
import { eventually } from "@platform/testing";
import { BULK_HORIZON_MS, BulkPacer, contextOf, reservePacingSlot, reservePacingSlots } from "../src/service";
import { api, createChannel, eventsOf, newOrg, providerRequestsFor, receiveInbound, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("template sends (rpc.messaging.template.send.v1)", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });
  afterEach(() => h.sim.setMode({ kind: "ok" }));

  const db = () => (h.svc as unknown as { deps: { db: DataSource } }).deps.db;
  const digits = (phone: string) => phone.slice(1);
  const requestsTo = (phone: string) => h.sim.requests.filter((r) => (r.body as { to?: string })?.to === digits(phone));

  function batch(org: string, channelId: string, sends: Array<Partial<TemplateSendRequest["sends"][number]>>, extra: Partial<TemplateSendRequest> = {}) {
    const jobId = newId("job");
    return {
      organizationId: org,
      messagingChannelId: channelId,
      templateJobId: jobId,
      template: { name: "promo", language: "en_US", headerFormat: null },
      headerMedia: null,
      sends: sends.map((s, i) => ({ key: `job:${jobId}:r${i}`, phone: uniquePhone(), bodyParameters: [], buttonParameters: [], ...s })),
      ...extra,
    } as TemplateSendRequest;
  }
  const send = (req: TemplateSendRequest) => h.bus.request(MESSAGING_RPC.sendTemplates, req, { timeoutMs: 20_000 });

  async function rpcError(req: TemplateSendRequest): Promise<RpcCallError> {
    try {
      await send(req);
    } catch (err) {
      expect(err).to.be.instanceOf(RpcCallError);
      return err as RpcCallError;
    }
    throw new Error("expected an RPC error");
  }

  it("sends each template with the components of contract section 4 and our message id as callback data", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 80 });
    const req = batch(org, channel.id, [
      { bodyParameters: ["Ann", "42"], buttonParameters: [{ type: "quick_reply", payload: "YES" }, { type: "url", text: "abc", index: 2 }] },
      {},
    ], {
      template: { name: "order_update", language: "pt_BR", headerFormat: "document" },
      headerMedia: { url: "https://example.com/a.pdf", fileName: "a.pdf" },
    });
    const { results } = await send(req);
    expect(results.map((r) => r.key)).to.deep.equal(req.sends.map((s) => s.key));
    for (const r of results) {
      expect(r.outcome).to.equal("sent");
      expect(r.providerMessageId).to.be.a("string");
    }
    const [first] = providerRequestsFor(h, results[0].messageId!);
    expect(first.body).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: digits(req.sends[0].phone),
      type: "template",
      template: {
        name: "order_update",
        language: { policy: "deterministic", code: "pt_BR" },
        components: [
          { type: "header", parameters: [{ type: "document", document: { link: "https://example.com/a.pdf", filename: "a.pdf" } }] },
          { type: "body", parameters: [{ type: "text", text: "Ann" }, { type: "text", text: "42" }] },
          { type: "button", sub_type: "quick_reply", index: "0", parameters: [{ type: "payload", payload: "YES" }] },
          { type: "button", sub_type: "url", index: "2", parameters: [{ type: "text", text: "abc" }] },
        ],
      },
      biz_opaque_callback_data: results[0].messageId,
    });
    // Only the header for the second: no empty body component.
    const [second] = providerRequestsFor(h, results[1].messageId!);
    expect((second.body as { template: { components: unknown[] } }).template.components).to.have.length(1);

    // Events carry templateJobId; the conversations were opened.
    for (const r of results) {
      const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === r.messageId)[0], 10_000);
      expect(sent.data.templateJobId).to.equal(req.templateJobId);
      expect(sent.data.providerMessageId).to.equal(r.providerMessageId);
    }
    await eventually(() => eventsOf(h, "conversation.opened", (d) => req.sends.some((s) => s.phone === d.phone)).length === 2, 10_000);
    // The stored message says what was sent: the template and its parameters.
    const stored = await api(h, org).get(`/api/v1/messages/${results[0].messageId}`);
    expect(stored.status).to.equal(200);
    expect(stored.body).to.deep.include({ type: "template", direction: "outbound", text: null, templateJobId: req.templateJobId });
    expect(stored.body.template).to.deep.equal({
      name: "order_update",
      language: "pt_BR",
      headerMedia: { url: "https://example.com/a.pdf", fileName: "a.pdf" },
      bodyParameters: ["Ann", "42"],
      buttonParameters: [{ type: "quick_reply", payload: "YES" }, { type: "url", text: "abc", index: 2 }],
    });
    MessageRecord.parse(stored.body);
  });

  it("answers a repeated key from the stored message without calling the provider again", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 80 });
    const req = batch(org, channel.id, [{ bodyParameters: ["x"] }]);
    const first = await send(req);
    expect(first.results[0].outcome).to.equal("sent");
    const again = await send(req);
    expect(again.results).to.deep.equal(first.results);
    expect(providerRequestsFor(h, first.results[0].messageId!)).to.have.length(1);
    expect(requestsTo(req.sends[0].phone)).to.have.length(1);
  });

  it("two identical requests racing store and send one message", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 80 });
    const req = batch(org, channel.id, [{}, {}, {}]);
    const [a, b] = await Promise.all([send(req), send(req)]);
    for (let i = 0; i < 3; i++) {
      expect(a.results[i].messageId).to.be.a("string");
      expect(b.results[i].messageId).to.equal(a.results[i].messageId);
      await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === a.results[i].messageId).length === 1, 10_000);
      expect(requestsTo(req.sends[i].phone)).to.have.length(1);
    }
    const [{ n }] = await db().query(`SELECT count(*)::int AS n FROM messaging.messages WHERE organization_id = $1`, [org]);
    expect(n).to.equal(3);
  });

  it("never sends to an opted-out number and stores no message for it, but makes it a contact like every recipient", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 80 });
    const req = batch(org, channel.id, [{}, {}]);
    await h.contacts.optOut(org, channel.id, req.sends[1].phone);
    const { results } = await send(req);
    expect(results[0].outcome).to.equal("sent");
    expect(results[1]).to.deep.equal({ key: req.sends[1].key, outcome: "opted_out", messageId: null, providerMessageId: null });
    expect(requestsTo(req.sends[1].phone)).to.have.length(0);
    const rows = await db().query(`SELECT phone FROM messaging.messages WHERE organization_id = $1`, [org]);
    expect(rows.map((r: { phone: string }) => r.phone)).to.deep.equal([req.sends[0].phone]);
    // Contract: contacts are created by template jobs; a recipient skipped for its opt-out is one too.
    expect(await h.contacts.contactOf(org, req.sends[1].phone), "the opted-out recipient's contact").to.not.equal(undefined);
  });

  it("a transient provider failure answers pending; the worker sends it and message.sent carries templateJobId", async function () {
    this.timeout(30_000);
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 80 });
    const req = batch(org, channel.id, [{ bodyParameters: ["retry me"] }]);
    h.sim.setMode({ kind: "error", httpStatus: 503, code: 2, times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const { results } = await send(req);
    expect(results[0].outcome).to.equal("pending");
    expect(results[0].providerMessageId).to.equal(null);
    const sent = await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === results[0].messageId)[0], 20_000);
    expect(sent.data.templateJobId).to.equal(req.templateJobId);
    const calls = providerRequestsFor(h, results[0].messageId!);
    expect(calls.map((c) => c.responseStatus)).to.deep.equal([503, 200]);
    // The retry rebuilt the same template body.
    expect(calls[1].body).to.deep.equal(calls[0].body);
    const again = await send(req);
    expect(again.results[0]).to.include({ outcome: "sent", messageId: results[0].messageId, providerMessageId: sent.data.providerMessageId });
  });

  it("a permanent refusal answers failed with the provider's error, and message.failed", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 80 });
    const req = batch(org, channel.id, [{}]);
    h.sim.setMode({ kind: "error", httpStatus: 400, code: 132001, message: "Template name does not exist", times: 1, phoneNumberId: channel.providerPhoneNumberId });
    const { results } = await send(req);
    expect(results[0].outcome).to.equal("failed");
    expect(results[0].error).to.deep.equal({ code: "132001", title: "Template name does not exist" });
    const failed = await eventually(() => eventsOf(h, "message.failed", (d) => d.messageId === results[0].messageId)[0], 10_000);
    expect(failed.data.templateJobId).to.equal(req.templateJobId);
    expect(providerRequestsFor(h, results[0].messageId!)).to.have.length(1);
  });

  it("refuses an unknown, foreign or disconnected channel with a typed error", async () => {
    const org = newOrg();
    const other = await createChannel(h, newOrg());
    expect((await rpcError(batch(org, "chn_unknown", [{}]))).code).to.equal("CHANNEL_NOT_FOUND");
    const foreign = await rpcError(batch(org, other.id, [{}]));
    expect(foreign.code).to.equal("CHANNEL_NOT_FOUND");
    expect(foreign.retryable).to.equal(false);

    const off = await createChannel(h, org);
    const res = await api(h, org).patch(`/admin/v1/organizations/${org}/channels/${off.id}`).send({ connected: false });
    expect(res.status).to.equal(200);
    const req = batch(org, off.id, [{}]);
    const err = await rpcError(req);
    expect(err.code).to.equal("PROVIDER_NOT_CONNECTED");
    expect(err.retryable).to.equal(false);
    expect(requestsTo(req.sends[0].phone)).to.have.length(0);
  });

  it("bulk sends yield: while a batch is in flight, a single send's slot is within the horizon", async function () {
    this.timeout(30_000);
    const org = newOrg();
    const rate = 50;
    const intervalMs = 1000 / rate;
    const channel = await createChannel(h, org, { messagesPerSecond: rate });
    // 60 sends at 50 per second: the batch runs for more than a second.
    const req = batch(org, channel.id, Array.from({ length: 60 }, () => ({})));
    let done = false;
    const inFlight = send(req).finally(() => (done = true));
    const singleWaits: number[] = [];
    const tatAhead: number[] = [];
    await eventually(() => requestsTo(req.sends[0].phone).length > 0, 10_000, 5);
    while (!done) {
      const [{ ahead }] = await db().query(
        `SELECT (extract(epoch FROM (tat - clock_timestamp())) * 1000)::float8 AS ahead FROM messaging.channel_pacing WHERE channel_id = $1`,
        [channel.id],
      );
      tatAhead.push(ahead);
      // What a single send gets: the next slot after the bulk's horizon.
      singleWaits.push(await reservePacingSlot(db(), channel.id));
      await new Promise((r) => setTimeout(r, 50));
    }
    const { results } = await inFlight;
    expect(singleWaits.length).to.be.at.least(1);
    // The bulk never books more than the horizon ahead (plus its first slot), so a single send never waits behind more.
    for (const a of tatAhead) expect(a).to.be.at.most(BULK_HORIZON_MS + 2 * intervalMs);
    for (const w of singleWaits) expect(w).to.be.at.most(BULK_HORIZON_MS + 2 * intervalMs);
    for (const r of results) {
      expect(r.outcome).to.be.oneOf(["sent", "pending"]);
      await eventually(() => eventsOf(h, "message.sent", (d) => d.messageId === r.messageId).length === 1, 20_000);
    }
  });

  it("template batches in flight on one channel share one reservation loop, first come first served", async () => {
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 1000 });
    const pacer = new BulkPacer(db());
    const got: number[][] = [[], []];
    const order: number[] = [];
    const deadline = Date.now() + 20_000;
    const left = await Promise.all(
      [0, 1].map((k) => pacer.take(channel.id, 60, deadline, (offsets) => (got[k].push(...offsets), order.push(k)))),
    );
    expect(left).to.deep.equal([0, 0]);
    expect(got.map((g) => g.length)).to.deep.equal([60, 60]);
    // The first batch is served before the second gets anything (a reservation may serve the end of one and the start of the next).
    expect(order.indexOf(1)).to.be.at.least(order.lastIndexOf(0));
    // 120 slots at 1 ms each: the first reservation takes up to a horizon of them (only the first batch's 60 when the
    // second asked after it went out), each later one at least half a horizon: a few round trips for both, not one loop each.
    expect(pacer.roundTrips).to.be.at.most(1 + Math.ceil((120 - Math.min(60, BULK_HORIZON_MS)) / (BULK_HORIZON_MS / 2)));
  });

  it("a single send takes the earliest bulk slot held in its process; the bulk send gets the single's slot, and no slot is added", async () => {
    // 10 per second and a horizon of 5 s: one reservation grants all 20 bulk slots, 100 ms apart (the first now).
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 10 });
    const pacer = new BulkPacer(db(), 5_000);
    const released: number[] = [];
    const holds: Array<Promise<void>> = [];
    const offsets: number[] = [];
    await pacer.take(channel.id, 20, Date.now() + 20_000, (granted) => {
      for (const offset of granted) {
        const k = offsets.push(offset) - 1;
        holds.push(pacer.hold(channel.id, offset).then(() => void released.push(k)));
      }
    });
    expect(offsets).to.have.length(20);
    // The single send's own slot, after all of them (reserved on the same row, as the store statement does).
    const single = (await reservePacingSlots(db(), channel.id, 1))!;
    expect(single.firstInMs).to.be.greaterThan(offsets[19] - 100);
    const before = [...released];
    const wait = pacer.yieldTo(channel.id, single.firstInMs);
    expect(pacer.swaps).to.equal(1);
    // It now waits for the earliest bulk slot not yet started, not for its own, later one.
    const taken = offsets.findIndex((_, k) => k > 0 && !before.includes(k));
    expect(taken).to.be.greaterThan(0);
    expect(wait).to.be.lessThan(single.firstInMs);
    // The bulk send of that slot goes last, in the single's slot; every other one keeps its order. 20 bulk sends + 1 single = 21 slots, as reserved.
    await Promise.all(holds);
    expect(released).to.have.length(20);
    expect(released[19]).to.equal(taken);
    expect(released.slice(0, 19)).to.deep.equal(Array.from({ length: 20 }, (_, k) => k).filter((k) => k !== taken));
    // Nothing left to take: a later single send keeps its own slot.
    expect(pacer.yieldTo(channel.id, 500)).to.equal(500);
  });

  it("a single send during a template batch goes before the batch's held sends (same process)", async function () {
    this.timeout(30_000);
    const org = newOrg();
    const channel = await createChannel(h, org, { messagesPerSecond: 20 });
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    // 60 sends at 20 per second: the batch holds slots for three seconds.
    const req = batch(org, channel.id, Array.from({ length: 60 }, () => ({})));
    const inFlight = send(req);
    await eventually(() => requestsTo(req.sends[0].phone).length > 0, 10_000, 5);
    const ctx = contextOf((h.svc as unknown as { deps: Parameters<typeof contextOf>[0] }).deps);
    const swapsBefore = ctx.bulkPacer.swaps;
    const res = await api(h, org).post("/api/v1/messages").send({ messagingChannelId: channel.id, to: phone, text: "reply" });
    expect(res.status).to.equal(200);
    // Its slot came from the batch's held ones (the channel's rate is unchanged: the batch's send takes the single's slot).
    expect(ctx.bulkPacer.swaps).to.be.greaterThan(swapsBefore);
    const { results } = await inFlight;
    for (const r of results) expect(r.outcome).to.be.oneOf(["sent", "pending"]);
  });

  it("a batch without a slot before its deadline gets the rest back (for the worker)", async () => {
    // Slower than one slot per horizon: the first slot now, the next one 1,000 / 5 = 200 ms later, past the 50 ms deadline.
    expect(1000 / 5).to.be.greaterThan(BULK_HORIZON_MS);
    const channel = await createChannel(h, newOrg(), { messagesPerSecond: 5 });
    const pacer = new BulkPacer(db());
    const got: number[] = [];
    const left = await pacer.take(channel.id, 5, Date.now() + 50, (offsets) => got.push(...offsets));
    expect(await pacer.take(channel.id, 0, Date.now() + 50, () => expect.fail("nothing to grant"))).to.equal(0);
    expect(got).to.have.length(1);
    expect(left).to.equal(4);
  });
});
