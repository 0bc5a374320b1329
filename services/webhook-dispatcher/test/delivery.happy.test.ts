import { expect } from "chai";
import { SummarizedEventData } from "@platform/contracts";
import { signStandardWebhook, verifySignature, verifyStandardWebhook } from "@platform/webhook-verify";
import { eventually, jobsSettled, newId, publishEvent, Receiver, sleep, startStack, type Stack } from "./helpers";

describe("delivery (happy paths)", () => {
  let stack: Stack;
  let receiver: Receiver;

  before(async () => {
    stack = await startStack("whd_dlv");
    receiver = await Receiver.start();
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  async function subscribe(org: string, events: string[], url = receiver.url + "/hook") {
    const res = await stack.admin(org).post("", { url, events }).expect(201);
    return res.body as { id: string; secret: string };
  }

  it("POSTs the event body with exact headers, both signatures verified by the helper over the raw bytes", async () => {
    const org = newId("organization");
    const hook = await subscribe(org, ["message.sent"]);
    const eventId = await stack.publish("message.sent", org, { status: "sent", phone: "+15550001111" });
    const [req] = await eventually(() => (receiver.byEvent(eventId).length ? receiver.byEvent(eventId) : undefined));
    expect(req.path).to.equal("/hook");
    expect(req.headers["content-type"]).to.equal("application/json");
    expect(req.headers["user-agent"]).to.equal("Service-Webhooks/1");
    expect(req.headers["x-service-event"]).to.equal("message.sent");
    expect(req.headers["x-service-delivery"]).to.match(/^dlv_[0-9a-z]{26}$/);
    expect(req.headers["x-service-signature"]).to.match(/^[0-9a-f]{64}$/);
    expect(verifySignature(req.raw, req.headers["x-service-signature"], hook.secret)).to.equal(true);
    expect(verifySignature(req.raw, req.headers["x-service-signature"], hook.secret + "x")).to.equal(false);
    expect(req.headers["webhook-id"]).to.equal(eventId);
    expect(Math.abs(Number(req.headers["webhook-timestamp"]) - Date.now() / 1000)).to.be.lessThan(30);
    expect(verifyStandardWebhook(req.raw, req.headers, hook.secret)).to.equal(true);
    expect(req.headers["webhook-signature"]).to.equal(signStandardWebhook(eventId, String(req.headers["webhook-timestamp"]), req.raw, hook.secret));
    expect(Object.keys(req.body)).to.deep.equal(["event", "timestamp", "organizationId", "data"]);
    expect(req.body.event).to.equal("message.sent");
    expect(req.body.organizationId).to.equal(org);
    expect(req.body.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(req.body.data).to.include({ id: eventId, status: "sent", phone: "+15550001111" });
  });

  it("delivers one message's events to a webhook one at a time, in the order they happened; other messages' events alongside", async () => {
    const org = newId("organization");
    // Each answer takes 300 ms; a second request for a message while one is open would be an overlap.
    const open = new Set<string>();
    let overlaps = 0;
    const slow = await Receiver.start((r) => {
      const message = r.body?.data?.messageId as string;
      if (open.has(message)) overlaps++;
      open.add(message);
      setTimeout(() => open.delete(message), 300).unref();
      return { status: 200, body: "ok", delayMs: 300 };
    });
    try {
      await subscribe(org, ["message.sent", "message.delivered", "message.read"], slow.url + "/ordered");
      const [a, b] = [newId("message"), newId("message")];
      for (const type of ["message.sent", "message.delivered", "message.read"] as const) {
        await stack.publish(type, org, { messageId: a });
        await stack.publish(type, org, { messageId: b });
      }
      await eventually(() => slow.requests.length === 6, 20_000);
      const order = (m: string) => slow.requests.filter((r) => r.body.data.messageId === m).map((r) => r.body.event);
      expect(order(a)).to.deep.equal(["message.sent", "message.delivered", "message.read"]);
      expect(order(b)).to.deep.equal(["message.sent", "message.delivered", "message.read"]);
      expect(overlaps, "requests of one message in flight at once").to.equal(0);
      // The two messages were not made to wait for each other: b's sent was sent before a's sent was answered.
      const firstOfB = slow.requests.findIndex((r) => r.body.data.messageId === b);
      expect(firstOfB).to.equal(1);
    } finally {
      await slow.close();
    }
  });

  it("delivers only subscribed event types, only to the event's organization, and to every subscribed webhook", async () => {
    const org = newId("organization");
    const other = newId("organization");
    await subscribe(org, ["message.delivered", "optout.created"], receiver.url + "/a");
    await subscribe(org, ["optout.created"], receiver.url + "/b");
    await subscribe(other, ["message.delivered", "message.read", "optout.created"], receiver.url + "/other");
    const read = await stack.publish("message.read", org);
    const delivered = await stack.publish("message.delivered", org);
    const optout = await stack.publish("optout.created", org, { optOutId: newId("optOut") });
    await eventually(() => receiver.byEvent(optout).length === 2 && receiver.byEvent(delivered).length === 1);
    await sleep(300);
    expect(receiver.byEvent(read)).to.have.length(0);
    expect(receiver.byEvent(delivered).map((r) => r.path)).to.deep.equal(["/a"]);
    expect(receiver.byEvent(optout).map((r) => r.path).sort()).to.deep.equal(["/a", "/b"]);
    expect(receiver.requests.filter((r) => r.path === "/other")).to.have.length(0);
  });

  it("does not deliver events that happened before the webhook existed", async () => {
    const org = newId("organization");
    await subscribe(org, ["message.sent"], receiver.url + "/new");
    const old = await publishEvent(stack.bus, "message.sent", org, {}, new Date(Date.now() - 60_000));
    const current = await stack.publish("message.sent", org);
    await eventually(() => receiver.byEvent(current).length === 1);
    await sleep(200);
    expect(receiver.byEvent(old)).to.have.length(0);
  });

  it("treats any 2xx as success and logs the attempt (time, event, attempt, status, body, duration)", async () => {
    const org = newId("organization");
    const hook = await subscribe(org, ["conversation.opened"], receiver.url + "/accepted");
    const previous = receiver.respond;
    receiver.respond = (r) => (r.path === "/accepted" ? { status: 202, body: "queued" } : previous(r, 0));
    try {
      const eventId = await stack.publish("conversation.opened", org);
      const log = await eventually(async () => {
        const res = await stack.admin(org).get(`/${hook.id}/deliveries`).expect(200);
        return res.body.items.length === 1 ? res.body.items : undefined;
      });
      expect(log[0]).to.include({ eventId, event: "conversation.opened", attempt: 1, responseStatus: 202, responseBody: "queued", error: null });
      expect(log[0].id).to.match(/^dlv_/);
      expect(log[0].durationMs).to.be.a("number");
      expect(new Date(log[0].createdAt).toISOString()).to.equal(log[0].createdAt);
      expect(receiver.byEvent(eventId)[0].headers["x-service-delivery"]).to.equal(log[0].id);
      await jobsSettled(stack, hook.id); // delivered: no job left to retry
      expect(receiver.byEvent(eventId)).to.have.length(1);
      const list = await stack.admin(org).get("").expect(200);
      expect(list.body.items[0].consecutiveFailures).to.equal(0);
    } finally {
      receiver.respond = previous;
    }
  });

  it("summarizes a payload over 256 KB (event, small fields, summarized flag, omitted names), valid JSON, still signed", async () => {
    const org = newId("organization");
    const hook = await subscribe(org, ["message.received"]);
    const contactId = newId("contact");
    const big = "x".repeat(300 * 1024);
    const eventId = await stack.publish("message.received", org, { contactId, conversationId: newId("conversation"), text: big, type: "text" });
    const small = await stack.publish("message.received", org, { contactId, text: "y".repeat(200 * 1024), type: "text" });
    const [req] = await eventually(() => (receiver.byEvent(eventId).length ? receiver.byEvent(eventId) : undefined));
    expect(req.raw.length).to.be.lessThan(256 * 1024);
    expect(req.body.event).to.equal("message.received");
    expect(req.body.data.id).to.equal(eventId);
    expect(req.body.data.summarized).to.equal(true);
    SummarizedEventData.parse(req.body.data);
    expect(req.body.data.contactId).to.equal(contactId);
    expect(req.body.data.messageId).to.match(/^msg_/);
    expect(req.body.data.conversationId).to.match(/^conv_/);
    expect(req.body.data).to.not.have.property("text");
    expect(req.body.data).to.include({ type: "text" });
    expect(req.body.data.omitted).to.deep.equal(["text"]);
    expect(verifySignature(req.raw, req.headers["x-service-signature"], hook.secret)).to.equal(true);
    const [smallReq] = await eventually(() => (receiver.byEvent(small).length ? receiver.byEvent(small) : undefined));
    expect(smallReq.body.data.text).to.have.length(200 * 1024);
    expect(smallReq.body.data).to.not.have.property("summarized");
  });

  it("send test: one webhook.test attempt, answered with the result, logged, signed", async () => {
    const org = newId("organization");
    const hook = await subscribe(org, ["message.sent"], receiver.url + "/test-ok");
    const res = await stack.admin(org).post(`/${hook.id}/test`).expect(200);
    expect(res.body.delivered).to.equal(true);
    expect(res.body.responseStatus).to.equal(200);
    expect(res.body.durationMs).to.be.a("number");
    const req = receiver.requests.filter((r) => r.path === "/test-ok").at(-1)!;
    expect(req.body.event).to.equal("webhook.test");
    expect(req.body.data.webhookId).to.equal(hook.id);
    expect(req.body.data.id).to.match(/^evt_/);
    expect(req.headers["x-service-event"]).to.equal("webhook.test");
    expect(verifySignature(req.raw, req.headers["x-service-signature"], hook.secret)).to.equal(true);
    expect(verifyStandardWebhook(req.raw, req.headers, hook.secret)).to.equal(true);
    const log = await stack.admin(org).get(`/${hook.id}/deliveries`).expect(200);
    expect(log.body.items[0]).to.include({ event: "webhook.test", eventId: req.body.data.id, attempt: 1, responseStatus: 200 });
  });
});
