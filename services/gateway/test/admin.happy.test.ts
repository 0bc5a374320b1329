import { expect } from "chai";
import request from "supertest";
import { collectSubject, eventually } from "@platform/testing";
import { GatewayHarness } from "./harness";

describe("gateway: admin organizations", () => {
  const h = new GatewayHarness();
  before(() => h.start());
  after(() => h.stop());

  it("creates an organization with the contract's defaults and announces it on the bus", async () => {
    const seen = await collectSubject(h.env.natsUrl, `${h.env.namespace}.sys.organization.upserted.v1`);
    const res = await h.admin().post("/admin/v1/organizations").send({ name: "Acme" }).expect(201);
    expect(res.body).to.include({ name: "Acme", plan: "growth" });
    expect(res.body.id).to.match(/^org_/);
    expect(res.body.rateLimit).to.deep.equal({ perSecond: 50, burst: 100 });
    expect(res.body.optOutKeywords).to.deep.equal(["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT"]);
    await eventually(() => seen.received.some((m) => m.data.id === res.body.id));
    await seen.close();
  });

  it("takes plan, rate limit and keywords at creation and by PATCH", async () => {
    const res = await h
      .admin()
      .post("/admin/v1/organizations")
      .send({ name: "B", plan: "starter", rateLimit: { perSecond: 5, burst: 10 }, optOutKeywords: ["BASTA"] })
      .expect(201);
    expect(res.body).to.deep.include({ plan: "starter", rateLimit: { perSecond: 5, burst: 10 }, optOutKeywords: ["BASTA"] });
    const patched = await h.admin().patch(`/admin/v1/organizations/${res.body.id}`).send({ plan: "inactive", optOutKeywords: null }).expect(200);
    expect(patched.body.plan).to.equal("inactive");
    expect(patched.body.optOutKeywords).to.include("STOP");
    // Matched in lower case: each keyword once, as first written.
    const distinct = await h.admin().patch(`/admin/v1/organizations/${res.body.id}`).send({ optOutKeywords: ["alto", "Para", "ALTO", " alto ", "para"] }).expect(200);
    expect(distinct.body.optOutKeywords).to.deep.equal(["alto", "Para"]);
    const got = await h.admin().get(`/admin/v1/organizations/${res.body.id}`).expect(200);
    expect(got.body.plan).to.equal("inactive");
  });

  it("pages organizations with an opaque cursor", async () => {
    for (let i = 0; i < 3; i++) await h.admin().post("/admin/v1/organizations").send({ name: `P${i}` }).expect(201);
    const seen = new Set<string>();
    let cursor: string | undefined;
    do {
      const res = await h.admin().get(`/admin/v1/organizations?limit=2${cursor ? `&cursor=${cursor}` : ""}`).expect(200);
      for (const o of res.body.items) {
        expect(seen.has(o.id)).to.equal(false);
        seen.add(o.id);
      }
      cursor = res.body.nextCursor;
    } while (cursor);
    expect(seen.size).to.be.greaterThan(3);
  });

  it("pages an organization's API keys in creation order with an opaque cursor", async () => {
    const org = await h.admin().post("/admin/v1/organizations").send({ name: "Keys" }).expect(201);
    const path = `/admin/v1/organizations/${org.body.id}/api-keys`;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await h.admin().post(path).send({ name: `k${i}` }).expect(201)).body.id);
    const first = await h.admin().get(`${path}?limit=2`).expect(200);
    expect(first.body.items.map((k: { id: string }) => k.id)).to.deep.equal(ids.slice(0, 2));
    expect(first.body.nextCursor).to.be.a("string");
    const second = await h.admin().get(path).query({ limit: 2, cursor: first.body.nextCursor }).expect(200);
    expect(second.body.items.map((k: { id: string }) => k.id)).to.deep.equal(ids.slice(2));
    expect(second.body).to.not.have.property("nextCursor");
    const all = await h.admin().get(path).expect(200);
    expect(all.body.items.map((k: { id: string }) => k.id)).to.deep.equal(ids);
    expect(all.body).to.not.have.property("nextCursor");
  });

  it("serves the OpenAPI document without a key", async () => {
    const res = await request(h.url).get("/api-reference/openapi.json").expect(200);
    expect(res.body.openapi).to.equal("3.1.0");
    expect(Object.keys(res.body.paths)).to.include.members(["/api/v1/ping", "/api/v1/messages", "/api/v1/contacts", "/api/v1/opt-outs"]);
    const action = res.body.components.schemas.OptOutRequest.properties.action;
    expect(action.enum).to.deep.equal(["set", "clear"]);
  });

  it("serves the API reference page and its bundled renderer without a key, offline", async () => {
    const page = await request(h.url).get("/api-reference").expect(200);
    expect(page.headers["content-type"]).to.match(/^text\/html/);
    expect(page.text).to.include('data-url="/api-reference/openapi.json"');
    expect(page.text).to.include('<script src="/api-reference/api-reference.js"></script>');
    expect(page.text).to.not.match(/https?:\/\//); // nothing from a CDN
    const script = await request(h.url).get("/api-reference/api-reference.js").set("Accept-Encoding", "gzip").expect(200);
    expect(script.headers["content-type"]).to.match(/^text\/javascript/);
    expect(script.headers["content-encoding"]).to.equal("gzip");
    expect(script.text).to.include("createApiReference");
    expect(script.text.length).to.be.greaterThan(1_000_000);
    const plain = await request(h.url).get("/api-reference/api-reference.js").set("Accept-Encoding", "identity").expect(200);
    expect(plain.headers).to.not.have.property("content-encoding");
    expect(plain.text).to.equal(script.text);
  });

  it("answers probes", async () => {
    await request(h.url).get("/healthz").expect(200);
    const ready = await request(h.url).get("/readyz").expect(200);
    expect(ready.body.checks).to.deep.equal({ postgres: "ok", nats: "ok" });
  });
});
