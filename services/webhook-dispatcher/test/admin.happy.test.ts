import { expect } from "chai";
import { CreatedWebhook, Webhook, WebhookDelivery, WebhookDeliveryList, WebhookList } from "@platform/contracts";
import { eventually, jobsSettled, newId, Receiver, startStack, type Stack } from "./helpers";

describe("admin API: webhooks", () => {
  let stack: Stack;
  let receiver: Receiver;

  before(async () => {
    stack = await startStack("whd_admin");
    receiver = await Receiver.start();
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  it("creates a webhook with a whsec_ secret shown only in the creation answer", async () => {
    const org = newId("organization");
    const res = await stack.admin(org).post("", { url: receiver.url + "/h", events: ["message.sent", "optout.created"] }).expect(201);
    CreatedWebhook.parse(res.body);
    expect(Object.keys(res.body).sort()).to.deep.equal(["active", "createdAt", "events", "id", "secret", "url"]);
    expect(res.body.id).to.match(/^wh_/);
    expect(res.body.active).to.equal(true);
    expect(res.body.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(res.body.secret.slice(6), "base64")).to.have.length(32);
    const list = await stack.admin(org).get("").expect(200);
    expect(list.body.items).to.have.length(1);
    Webhook.parse(list.body.items[0]);
    expect(list.body.items[0]).to.not.have.property("secret");
    expect(JSON.stringify(list.body)).to.not.include(res.body.secret.slice(6));
    expect(list.body.items[0]).to.include({ id: res.body.id, consecutiveFailures: 0, deactivatedAt: null, active: true });
    expect(list.body).to.not.have.property("nextCursor");
  });

  it("lists in creation order with cursor pagination, scoped to the organization", async () => {
    const org = newId("organization");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await stack.admin(org).post("", { url: `${receiver.url}/p${i}`, events: ["message.read"] }).expect(201)).body.id);
    await stack.admin(newId("organization")).post("", { url: receiver.url + "/x", events: ["message.read"] }).expect(201);
    const first = await stack.admin(org).get("?limit=2").expect(200);
    WebhookList.parse(first.body);
    expect(first.body.items.map((w: { id: string }) => w.id)).to.deep.equal(ids.slice(0, 2));
    const second = await stack.admin(org).get(`?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`).expect(200);
    expect(second.body.items.map((w: { id: string }) => w.id)).to.deep.equal(ids.slice(2, 4));
    const third = await stack.admin(org).get(`?limit=2&cursor=${encodeURIComponent(second.body.nextCursor)}`).expect(200);
    expect(third.body.items.map((w: { id: string }) => w.id)).to.deep.equal(ids.slice(4));
    expect(third.body).to.not.have.property("nextCursor");
  });

  it("updates url, events and active; deactivation by hand stops deliveries, re-enabling resumes them", async () => {
    const org = newId("organization");
    const created = (await stack.admin(org).post("", { url: receiver.url + "/old", events: ["message.sent"] }).expect(201)).body;
    const patched = await stack.admin(org).patch(`/${created.id}`, { url: receiver.url + "/new", events: ["message.failed"] }).expect(200);
    Webhook.parse(patched.body);
    expect(patched.body).to.include({ url: receiver.url + "/new", active: true });
    expect(patched.body.events).to.deep.equal(["message.failed"]);
    const failed = await stack.publish("message.failed", org);
    await eventually(() => receiver.byEvent(failed).length === 1);
    expect(receiver.byEvent(failed)[0].path).to.equal("/new");

    const off = await stack.admin(org).patch(`/${created.id}`, { active: false }).expect(200);
    expect(off.body.active).to.equal(false);
    expect(off.body.deactivatedAt).to.be.a("string");
    // Nothing until re-enabled, not even the test action: answered, not sent, not logged.
    const sentBefore = receiver.requests.length;
    const test = await stack.admin(org).post(`/${created.id}/test`).expect(200);
    expect(test.body).to.deep.equal({ delivered: false, responseStatus: null, durationMs: 0 });
    expect((await stack.admin(org).get(`/${created.id}/deliveries`).expect(200)).body.items.filter((d: { event: string }) => d.event === "webhook.test")).to.have.length(0);
    // A second active webhook of the organization is the marker: once it got the event, the event's fan-out was
    // decided, and the inactive webhook has no job for it.
    const marker = (await stack.admin(org).post("", { url: receiver.url + "/off-marker", events: ["message.failed"] }).expect(201)).body;
    const ignored = await stack.publish("message.failed", org);
    await eventually(() => receiver.byEvent(ignored).length === 1);
    await jobsSettled(stack, created.id);
    expect(receiver.byEvent(ignored).map((r) => r.path)).to.deep.equal(["/off-marker"]);
    await stack.admin(org).del(`/${marker.id}`).expect(204);
    expect(receiver.requests.slice(sentBefore).filter((r) => r.path === "/new")).to.have.length(0);
    const on = await stack.admin(org).patch(`/${created.id}`, { active: true }).expect(200);
    expect(on.body).to.include({ active: true, deactivatedAt: null, consecutiveFailures: 0 });
    const again = await stack.publish("message.failed", org);
    await eventually(() => receiver.byEvent(again).length === 1);
  });

  it("deletes a webhook: 204, then gone from the list and 404 on its routes", async () => {
    const org = newId("organization");
    const created = (await stack.admin(org).post("", { url: receiver.url + "/gone", events: ["message.sent"] }).expect(201)).body;
    await stack.admin(org).del(`/${created.id}`).expect(204);
    expect((await stack.admin(org).get("").expect(200)).body.items).to.have.length(0);
    await stack.admin(org).del(`/${created.id}`).expect(404);
    await stack.admin(org).post(`/${created.id}/test`).expect(404);
    await stack.admin(org).get(`/${created.id}/deliveries`).expect(404);
    // Another webhook of the organization is the marker: once it got the event, the deleted one would have had it too.
    await stack.admin(org).post("", { url: receiver.url + "/gone-marker", events: ["message.sent"] }).expect(201);
    const eventId = await stack.publish("message.sent", org);
    await eventually(() => receiver.byEvent(eventId).length >= 1);
    expect(receiver.byEvent(eventId).map((r) => r.path)).to.deep.equal(["/gone-marker"]);
  });

  it("pages the attempt log newest first", async () => {
    const org = newId("organization");
    const created = (await stack.admin(org).post("", { url: receiver.url + "/log", events: ["message.sent"] }).expect(201)).body;
    for (let i = 0; i < 3; i++) await stack.admin(org).post(`/${created.id}/test`).expect(200);
    const page1 = await stack.admin(org).get(`/${created.id}/deliveries?limit=2`).expect(200);
    expect(page1.body.items).to.have.length(2);
    WebhookDeliveryList.parse(page1.body);
    page1.body.items.forEach((i: unknown) => WebhookDelivery.parse(i));
    const page2 = await stack.admin(org).get(`/${created.id}/deliveries?limit=2&cursor=${encodeURIComponent(page1.body.nextCursor)}`).expect(200);
    expect(page2.body.items).to.have.length(1);
    expect(page2.body).to.not.have.property("nextCursor");
    const all = [...page1.body.items, ...page2.body.items];
    const times = all.map((i: { createdAt: string }) => i.createdAt);
    expect([...times].sort().reverse()).to.deep.equal(times);
    expect(new Set(all.map((i: { id: string }) => i.id)).size).to.equal(3);
    // The cursor is this webhook's log's: on another webhook's log it is not one of ours.
    const other = (await stack.admin(org).post("", { url: receiver.url + "/log", events: ["message.sent"] }).expect(201)).body;
    const elsewhere = await stack.admin(org).get(`/${other.id}/deliveries?cursor=${encodeURIComponent(page1.body.nextCursor)}`).expect(400);
    expect(elsewhere.body.error.code).to.equal("INVALID_CURSOR");
  });
});
