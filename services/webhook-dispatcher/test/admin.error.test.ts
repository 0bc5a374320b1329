import { expect } from "chai";
import request from "supertest";
import { eventually, newId, Receiver, startStack, type Stack } from "./helpers";

describe("admin API: webhooks (errors)", () => {
  let stack: Stack;
  let receiver: Receiver;

  before(async () => {
    stack = await startStack("whd_adminerr");
    receiver = await Receiver.start();
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  const validation = (res: request.Response, path: string) => {
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal("VALIDATION_ERROR");
    expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
  };

  it("refuses bad bodies with VALIDATION_ERROR and the offending path", async () => {
    const org = newId("organization");
    validation(await stack.admin(org).post("", { events: ["message.sent"] }), "url");
    validation(await stack.admin(org).post("", { url: "not a url", events: ["message.sent"] }), "url");
    validation(await stack.admin(org).post("", { url: "ftp://example.com/x", events: ["message.sent"] }), "url");
    validation(await stack.admin(org).post("", { url: receiver.url, events: [] }), "events");
    validation(await stack.admin(org).post("", { url: receiver.url, events: ["webhook.test"] }), "events.0");
    validation(await stack.admin(org).post("", { url: receiver.url, events: ["message.sent", "nope"] }), "events.1");
    validation(await stack.admin(org).post("", { url: receiver.url }), "events");
    validation(await stack.admin(org).post("", { url: "https://user:pw@example.com/", events: ["message.sent"] }), "url");
    // Spaces or control characters inside: refused (a parser would drop a tab or a newline, calling another URL).
    validation(await stack.admin(org).post("", { url: `${receiver.url}/a\tb`, events: ["message.sent"] }), "url");
    validation(await stack.admin(org).post("", { url: `${receiver.url}/a b`, events: ["message.sent"] }), "url");
    // Around it: trimmed, stored as called.
    const trimmed = (await stack.admin(org).post("", { url: ` \t${receiver.url}/t \n`, events: ["message.read"] }).expect(201)).body;
    expect(trimmed.url).to.equal(`${receiver.url}/t`);
    await stack.admin(org).del(`/${trimmed.id}`).expect(204);
    const created = (await stack.admin(org).post("", { url: receiver.url, events: ["message.sent"] }).expect(201)).body;
    validation(await stack.admin(org).patch(`/${created.id}`, { url: "nope" }), "url");
    validation(await stack.admin(org).patch(`/${created.id}`, { url: `${receiver.url}\n/x` }), "url");
    validation(await stack.admin(org).patch(`/${created.id}`, { events: [] }), "events");
    validation(await stack.admin(org).patch(`/${created.id}`, { active: "yes" }), "active");
    validation(await stack.admin(org).get("?limit=0"), "query.limit");
    validation(await stack.admin(org).get(`/${created.id}/deliveries?limit=101`), "query.limit");
    validation(await stack.admin(org).get("?limit=1e2"), "query.limit");
    validation(await stack.admin(org).get(`/${created.id}/deliveries?limit=0x10`), "query.limit");
    expect((await stack.admin(org).get("")).body.items).to.have.length(1);
  });

  it("answers INVALID_JSON and INVALID_CURSOR, never 500", async () => {
    const org = newId("organization");
    const res = await request(stack.svc.url)
      .post(`/admin/v1/organizations/${org}/webhooks`)
      .set("x-internal-token", stack.env.internalToken)
      .set("x-organization-id", org)
      .set("content-type", "application/json")
      .send("{bad");
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal("INVALID_JSON");
    const bad = await stack.admin(org).get("?cursor=abc.def").expect(400);
    expect(bad.body.error.code).to.equal("INVALID_CURSOR");
    const created = (await stack.admin(org).post("", { url: receiver.url, events: ["message.sent"] }).expect(201)).body;
    const bad2 = await stack.admin(org).get(`/${created.id}/deliveries?cursor=xyz`).expect(400);
    expect(bad2.body.error.code).to.equal("INVALID_CURSOR");
    // A cursor of the webhooks list is not a cursor of the attempt log.
    for (let i = 0; i < 2; i++) await stack.admin(org).post("", { url: receiver.url, events: ["message.sent"] }).expect(201);
    const page = await stack.admin(org).get("?limit=1").expect(200);
    const bad3 = await stack.admin(org).get(`/${created.id}/deliveries?cursor=${encodeURIComponent(page.body.nextCursor)}`).expect(400);
    expect(bad3.body.error.code).to.equal("INVALID_CURSOR");
    // A cursor is the organization's that listed it: replayed on another organization's list, it is not one of ours.
    const other = newId("organization");
    for (let i = 0; i < 2; i++) await stack.admin(other).post("", { url: receiver.url, events: ["message.sent"] }).expect(201);
    const elsewhere = await stack.admin(other).get(`?cursor=${encodeURIComponent(page.body.nextCursor)}`).expect(400);
    expect(elsewhere.body.error.code).to.equal("INVALID_CURSOR");
    expect((await stack.admin(org).get(`?cursor=${encodeURIComponent(page.body.nextCursor)}`).expect(200)).body.items).to.have.length(2);
  });

  it("is 404 NOT_FOUND for an unknown webhook or one of another organization, which stays untouched", async () => {
    const owner = newId("organization");
    const intruder = newId("organization");
    const created = (await stack.admin(owner).post("", { url: receiver.url + "/mine", events: ["message.sent"] }).expect(201)).body;
    for (const org of [intruder, owner]) {
      const id = org === owner ? newId("webhook") : created.id;
      const answers = [
        await stack.admin(org).patch(`/${id}`, { active: false }),
        await stack.admin(org).post(`/${id}/test`),
        await stack.admin(org).get(`/${id}/deliveries`),
        await stack.admin(org).del(`/${id}`),
      ];
      for (const a of answers) {
        expect(a.status).to.equal(404);
        expect(a.body.error.code).to.equal("NOT_FOUND");
      }
    }
    expect((await stack.admin(intruder).get("")).body.items).to.have.length(0);
    expect(receiver.requests.filter((r) => r.path === "/mine")).to.have.length(0);
    const mine = (await stack.admin(owner).get("")).body.items[0];
    expect(mine).to.include({ id: created.id, active: true });
  });

  it("refuses calls without the internal token", async () => {
    const org = newId("organization");
    const res = await request(stack.svc.url).get(`/admin/v1/organizations/${org}/webhooks`).set("x-organization-id", org);
    expect(res.status).to.equal(401);
    expect(res.body.error.code).to.equal("UNAUTHORIZED");
  });

  it("send test to an unreachable endpoint answers delivered: false with no status", async () => {
    const org = newId("organization");
    const dead = await Receiver.start();
    const url = dead.url + "/gone";
    await dead.close();
    const created = (await stack.admin(org).post("", { url, events: ["message.sent"] }).expect(201)).body;
    const res = await stack.admin(org).post(`/${created.id}/test`).expect(200);
    expect(res.body).to.include({ delivered: false, responseStatus: null });
    const log = await eventually(async () => (await stack.admin(org).get(`/${created.id}/deliveries`)).body.items[0]);
    expect(log.error).to.match(/connection error/);
  });
});
