import { expect } from "chai";
import { startSimulator, type Simulator } from "../src";
import { post, textBody, TOKEN } from "./helpers";

describe("provider simulator: send API", () => {
  let sim: Simulator;

  before(async () => {
    sim = await startSimulator({ accessToken: TOKEN, autoStatuses: false });
  });
  after(() => sim.close());
  beforeEach(() => sim.reset());

  const send = (body: unknown = textBody("15550001111", "msg_1"), token: string | null = TOKEN) =>
    post(`${sim.url}/pn_1/messages`, body, token);

  it("answers a send with a wamid and records the request", async () => {
    const { status, json } = await send(textBody("+15550001111", "msg_1"));
    expect(status).to.equal(200);
    const answer = json as { messaging_product: string; contacts: unknown[]; messages: Array<{ id: string }> };
    expect(answer.messaging_product).to.equal("whatsapp");
    expect(answer.contacts).to.deep.equal([{ input: "+15550001111", wa_id: "15550001111" }]);
    expect(answer.messages).to.have.length(1);
    expect(answer.messages[0].id).to.match(/^wamid\.\S+$/);

    expect(sim.requests).to.have.length(1);
    const rec = sim.requests[0];
    expect(rec.method).to.equal("POST");
    expect(rec.path).to.equal("/pn_1/messages");
    expect(rec.phoneNumberId).to.equal("pn_1");
    expect(rec.headers.authorization).to.equal(`Bearer ${TOKEN}`);
    expect(rec.body).to.deep.equal(textBody("+15550001111", "msg_1"));
    expect(rec.responseStatus).to.equal(200);
    expect(rec.providerMessageId).to.equal(answer.messages[0].id);
    expect(rec.receivedAt).to.be.a("number");
  });

  it("gives every message a distinct id and accepts a Graph version prefix", async () => {
    const a = await send();
    const b = await post(`${sim.url}/v21.0/pn_1/messages`, textBody("15550001111"));
    expect(b.status).to.equal(200);
    const id = (r: { json: unknown }) => (r.json as { messages: Array<{ id: string }> }).messages[0].id;
    expect(id(a)).to.not.equal(id(b));
  });

  it("accepts a template with components", async () => {
    const { status } = await send({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "15550001111",
      type: "template",
      template: {
        name: "promo",
        language: { policy: "deterministic", code: "en_US" },
        components: [
          { type: "header", parameters: [{ type: "document", document: { link: "https://x/a.pdf", filename: "a.pdf" } }] },
          { type: "body", parameters: [{ type: "text", text: "Ana" }] },
          { type: "button", sub_type: "quick_reply", index: "0", parameters: [{ type: "payload", payload: "STOP" }] },
        ],
      },
      biz_opaque_callback_data: "msg_9",
    });
    expect(status).to.equal(200);
  });

  it("answers 401 with a Graph OAuth error for a wrong or missing token", async () => {
    for (const token of ["wrong", null]) {
      const { status, json } = await send(textBody("15550001111"), token);
      expect(status).to.equal(401);
      const error = (json as { error: { message: string; type: string; code: number } }).error;
      expect(error.type).to.equal("OAuthException");
      expect(error.code).to.equal(190);
      expect(error.message).to.be.a("string");
    }
    expect(sim.requests.map((r) => r.responseStatus)).to.deep.equal([401, 401]);
  });

  it("counts characters as the API does: 4,096 emoji are a valid text, 1,024 a valid parameter", async () => {
    const text = { ...textBody("15550001111"), text: { body: "😀".repeat(4096) } };
    const parameter = {
      messaging_product: "whatsapp",
      to: "15550001111",
      type: "template",
      template: { name: "t", language: { code: "en" }, components: [{ type: "body", parameters: [{ type: "text", text: "é😀".repeat(512) }] }] },
    };
    for (const body of [text, parameter]) expect((await send(body)).status).to.equal(200);
  });

  it("answers 400 code 100 for malformed bodies", async () => {
    const bad: unknown[] = [
      "not json",
      [],
      { ...textBody("15550001111"), messaging_product: "sms" },
      { ...textBody("15550001111"), to: "call me" },
      { ...textBody("15550001111"), text: { body: "" } },
      { messaging_product: "whatsapp", to: "15550001111", type: "template", template: { name: "t" } },
      {
        messaging_product: "whatsapp",
        to: "15550001111",
        type: "template",
        template: { name: "t", language: { code: "en" }, components: [{ type: "body", parameters: [] }] },
      },
      {
        messaging_product: "whatsapp",
        to: "15550001111",
        type: "template",
        template: { name: "t", language: { code: "en" }, components: [{ type: "body", parameters: [{ type: "text", text: "x".repeat(1025) }] }] },
      },
      { ...textBody("15550001111"), text: { body: "😀".repeat(4097) } },
    ];
    for (const body of bad) {
      const { status, json } = await send(body);
      expect(status, JSON.stringify(body).slice(0, 80)).to.equal(400);
      expect((json as { error: { code: number } }).error.code).to.equal(100);
    }
  });

  describe("fault modes", () => {
    it("error mode answers the configured error until reset to ok", async () => {
      sim.setMode({ kind: "error", httpStatus: 503, code: 2, message: "Service unavailable" });
      for (let i = 0; i < 3; i++) {
        const { status, json } = await send();
        expect(status).to.equal(503);
        expect(json).to.deep.equal({ error: { message: "Service unavailable", type: "OAuthException", code: 2, fbtrace_id: "sim" } });
      }
      sim.setMode({ kind: "ok" });
      expect((await send()).status).to.equal(200);
    });

    it("error mode with times reverts to ok after that many requests", async () => {
      sim.setMode({ kind: "error", httpStatus: 429, code: 130429, times: 2 });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await send()).status);
      expect(statuses).to.deep.equal([429, 429, 200, 200]);
      expect(sim.requests[0].responseStatus).to.equal(429);
    });

    it("a mode scoped to a phone number id reaches only its sends; others are answered ok and leave its times", async () => {
      sim.setMode({ kind: "error", httpStatus: 429, code: 130429, times: 1, phoneNumberId: "pn_2" });
      const other = () => post(`${sim.url}/pn_2/messages`, textBody("15550001111", "msg_2"), TOKEN);
      const statuses = [(await send()).status, (await send()).status, (await other()).status, (await other()).status];
      expect(statuses).to.deep.equal([200, 200, 429, 200]);
      expect((await post(`${sim.url}/_sim/mode`, { kind: "dropped", phoneNumberId: 7 }, null)).status).to.equal(400);
    });

    it("slow mode delays the answer, with times", async () => {
      sim.setMode({ kind: "slow", delayMs: 200, times: 1 });
      const started = Date.now();
      expect((await send()).status).to.equal(200);
      // A lower bound only (a busy machine makes it longer, never shorter); the decision is recorded per request.
      expect(Date.now() - started).to.be.at.least(190);
      expect((await send()).status).to.equal(200);
      expect(sim.requests.map((r) => r.delayedMs)).to.deep.equal([200, undefined]);
    });

    it("unreadable mode accepts the message but answers 200 without its id, with times", async () => {
      sim.setMode({ kind: "unreadable", times: 1 });
      const first = await send();
      expect([first.status, first.json]).to.deep.equal([200, { messaging_product: "whatsapp" }]);
      expect(sim.requests[0].providerMessageId, "accepted all the same").to.be.a("string");
      expect(((await send()).json as { messages: unknown[] }).messages).to.have.length(1);
    });

    it("the HTTP control API sets modes, lists requests and resets", async () => {
      expect((await post(`${sim.url}/_sim/mode`, { kind: "error", httpStatus: 400, code: 131030, times: 1 }, null)).status).to.equal(200);
      expect((await send()).status).to.equal(400);
      expect((await send()).status).to.equal(200);
      expect((await post(`${sim.url}/_sim/mode`, { kind: "slow" }, null)).status).to.equal(400);
      expect((await post(`${sim.url}/_sim/mode`, { kind: "nope" }, null)).status).to.equal(400);

      const listed = (await (await fetch(`${sim.url}/_sim/requests`)).json()) as { requests: unknown[] };
      expect(listed.requests).to.have.length(2);
      expect((await post(`${sim.url}/_sim/reset`, {}, null)).status).to.equal(200);
      expect(sim.requests).to.have.length(0);
    });
  });

  it("keeps the recorded requests bounded", async () => {
    const small = await startSimulator({ accessToken: TOKEN, autoStatuses: false, maxRecordedRequests: 20 });
    try {
      for (let i = 0; i < 50; i++) await post(`${small.url}/pn/messages`, textBody("15550001111", `m${i}`));
      expect(small.requests.length).to.be.at.most(20);
      expect((small.requests[small.requests.length - 1].body as { biz_opaque_callback_data: string }).biz_opaque_callback_data).to.equal("m49");
    } finally {
      await small.close();
    }
  });
});
