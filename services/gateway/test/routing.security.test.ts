import { createHmac } from "node:crypto";
import { gzipSync } from "node:zlib";
import { expect } from "chai";
import request from "supertest";
import { STREAMS, SUBJECTS } from "@platform/contracts";
import { collectSubject, eventually } from "@platform/testing";
import { echoServer, GatewayHarness } from "./harness";

describe("gateway: routing, plans and provider webhooks", () => {
  const h = new GatewayHarness();
  let echo: Awaited<ReturnType<typeof echoServer>>;
  before(async () => {
    echo = await echoServer();
    await h.start({ CONTACTS_URL: echo.url, MESSAGING_URL: echo.url, TEMPLATE_JOBS_URL: echo.url, WEBHOOK_DISPATCHER_URL: echo.url });
  });
  after(async () => {
    await h.stop();
    await echo.close();
  });

  it("forwards the path and query unchanged with the resolved organization, whatever the client claims", async () => {
    const a = await h.organization();
    const b = await h.organization();
    const res = await request(h.url)
      .get("/api/v1/contacts?limit=5")
      .set("Authorization", `Bearer ${a.key}`)
      .set("X-Organization-Id", b.id)
      .set("X-Internal-Token", "forged-token-forged-token")
      .expect(200);
    expect(res.body.url).to.equal("/api/v1/contacts?limit=5");
    expect(res.body.headers["x-organization-id"]).to.equal(a.id);
    expect(res.body.headers["x-internal-token"]).to.equal(h.env.internalToken);
    expect(res.body.headers).to.not.have.property("authorization");
    expect(res.body.headers["x-request-id"]).to.be.a("string");
  });

  it("matches /api/v1 routes as express did: any case, trailing slash, sub-paths, HEAD; 404 envelope after auth otherwise", async () => {
    const a = await h.organization();
    const auth = { Authorization: `Bearer ${a.key}` };
    let res = await request(h.url).get("/API/V1/Contacts/ct_1?x=1").set(auth).expect(200);
    expect(res.body.url).to.equal("/API/V1/Contacts/ct_1?x=1");
    res = await request(h.url).get("/api/v1/ping/?verbose=1").set(auth).set("X-Request-Id", "trace-42").expect(200);
    expect(res.body).to.deep.equal({ ok: true, organizationId: a.id });
    expect(res.headers["x-request-id"]).to.equal("trace-42");
    expect(res.headers["content-type"]).to.match(/^application\/json/);
    expect(res.headers["ratelimit"]).to.match(/^"org";r=\d+;t=\d+$/);
    await request(h.url).head("/api/v1/ping").set(auth).expect(200);
    for (const [method, path] of [["post", "/api/v1/ping"], ["get", "/api/v1/nope"], ["get", "/api/v1"], ["get", "/api/v1/messagesx"]] as const) {
      res = await request(h.url)[method](path).set(auth).expect(404);
      expect(res.body.error.code, `${method} ${path}`).to.equal("NOT_FOUND");
      expect(res.headers["ratelimit-policy"]).to.be.a("string");
    }
    res = await request(h.url).get("/api/v1/nope").expect(401);
    expect(res.body).to.deep.equal({ error: { code: "UNAUTHORIZED", message: "Invalid API key" } });
    // Not the API: express's 404 envelope, no key asked.
    res = await request(h.url).get("/api/v10/ping").expect(404);
    expect(res.body.error.code).to.equal("NOT_FOUND");
    // The front's requests are in the same latency histogram, labelled by route prefix.
    const metrics = await request(h.url).get("/metrics").expect(200);
    expect(metrics.text).to.match(/http_request_duration_seconds_count\{[^}]*route="\/api\/v1\/ping"[^}]*status="200"/);
    expect(metrics.text).to.match(/http_request_duration_seconds_count\{[^}]*route="\/api\/v1\/contacts"/);
  });

  it("forwards bodies of proxied POSTs", async () => {
    const a = await h.organization();
    const res = await request(h.url).post("/api/v1/messages").set("Authorization", `Bearer ${a.key}`).send({ to: "+15550001111", text: "hi" }).expect(200);
    expect(JSON.parse(res.body.body)).to.deep.equal({ to: "+15550001111", text: "hi" });
  });

  it("forwards admin routes of services with the path's organization, 404 for an unknown one", async () => {
    const a = await h.organization();
    const res = await h.admin().post(`/admin/v1/organizations/${a.id}/channels`).send({ name: "c" }).expect(200);
    expect(res.body.headers["x-organization-id"]).to.equal(a.id);
    expect(res.body.url).to.equal(`/admin/v1/organizations/${a.id}/channels`);
    await h.admin().get(`/admin/v1/organizations/org_nope/webhooks`).expect(404);
  });

  it("applies the plan rules with 402 PAYMENT_REQUIRED", async () => {
    const starter = await h.organization({ plan: "starter" });
    const inactive = await h.organization({ plan: "inactive" });
    const auth = (k: string) => ({ Authorization: `Bearer ${k}` });
    let res = await request(h.url).post("/api/v1/templates/send").set(auth(starter.key)).send({}).expect(402);
    expect(res.body.error.code).to.equal("PAYMENT_REQUIRED");
    await request(h.url).post("/api/v1/messages").set(auth(starter.key)).send({}).expect(200);
    res = await request(h.url).post("/api/v1/messages").set(auth(inactive.key)).send({}).expect(402);
    expect(res.body.error.code).to.equal("PAYMENT_REQUIRED");
    await request(h.url).post("/api/v1/opt-outs").set(auth(inactive.key)).send({}).expect(402);
    await request(h.url).get("/api/v1/contacts").set(auth(inactive.key)).expect(200);
    await request(h.url).get("/api/v1/ping").set(auth(inactive.key)).expect(200);
  });

  it("forwards a keyed request the plan does not cover, marked, so the service answers the key's first answer (or 402)", async () => {
    const starter = await h.organization({ plan: "starter" });
    const inactive = await h.organization({ plan: "inactive" });
    const growth = await h.organization();
    const auth = (k: string) => ({ Authorization: `Bearer ${k}` });
    for (const [org, path] of [[inactive, "/api/v1/messages"], [starter, "/api/v1/templates/send"], [inactive, "/API/V1/Templates/Send/"]] as const) {
      const res = await request(h.url).post(path).set(auth(org.key)).set("Idempotency-Key", `k-${path}`).send({}).expect(200);
      expect(res.body.headers["x-plan-refused"], path).to.equal("1");
    }
    // Without a key, or with one the service would refuse, the gateway answers 402 itself.
    for (const key of [undefined, "", "k".repeat(256)]) {
      const req = request(h.url).post("/api/v1/messages").set(auth(inactive.key));
      const res = await (key === undefined ? req : req.set("Idempotency-Key", key)).send({});
      expect([res.status, res.body.error?.code], String(key?.length)).to.deep.equal([402, "PAYMENT_REQUIRED"]);
    }
    // Not keyed: 402 whatever the headers.
    await request(h.url).post("/api/v1/opt-outs").set(auth(inactive.key)).set("Idempotency-Key", "k1").send({}).expect(402);
    // Covered: never marked, whatever the client claims.
    const res = await request(h.url).post("/api/v1/messages").set(auth(growth.key)).set("Idempotency-Key", "k2").set("X-Plan-Refused", "1").send({}).expect(200);
    expect(res.body.headers).to.not.have.property("x-plan-refused");
  });

  it("refuses a starter organization's template send whatever the letter case or trailing slash", async () => {
    const starter = await h.organization({ plan: "starter" });
    const paths = ["/api/v1/templates/send", "/api/v1/Templates/Send", "/api/v1/templates/send/", "/API/V1/TEMPLATES/SEND/"];
    // Repeated slashes, which the service's router reads as one.
    paths.push("/api/v1/templates//send", "/api/v1/templates///send", "/api/v1/templates/send//", "/api/v1//templates/send", "/api/v1/templates//send?x=1");
    for (const path of paths) {
      const res = await request(h.url).post(path).set("Authorization", `Bearer ${starter.key}`).send({});
      expect([res.status, res.body.error?.code], path).to.deep.equal([402, "PAYMENT_REQUIRED"]);
    }
    // Everything else under /templates stays covered, in any case.
    await request(h.url).get("/api/v1/Templates/Send/job_1").set("Authorization", `Bearer ${starter.key}`).expect(200);
    // The service gets the path the rule read.
    const growth = await h.organization();
    const res = await request(h.url).post("/api/v1/templates//send?x=1").set("Authorization", `Bearer ${growth.key}`).send({}).expect(200);
    expect(res.body.url).to.equal("/api/v1/templates/send?x=1");
  });

  it("answers the provider's subscription handshake", async () => {
    const ok = await request(h.url).get("/provider/webhooks?hub.mode=subscribe&hub.verify_token=dev-verify-token&hub.challenge=1158201444").expect(200);
    expect(ok.text).to.equal("1158201444");
    await request(h.url).get("/provider/webhooks?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1").expect(403);
  });

  it("stores every signed batch up to 1 MB, however much escaping grows its envelope (gzipped on the bus), and answers 413 PAYLOAD_TOO_LARGE over it", async () => {
    const seen = await collectSubject(h.env.natsUrl, `${h.env.namespace}.provider.inbound.v1`);
    const sign = (raw: string) => "sha256=" + createHmac("sha256", "dev-app-secret").update(raw).digest("hex");
    const exactly = (filler: string) => {
      const head = JSON.stringify({ object: "x", entry: [], pad: "" });
      return head.slice(0, -2) + filler.repeat((1_048_576 - head.length) / filler.length) + head.slice(-2);
    };
    // Exactly 1,048,576 bytes: plain letters, then quotes, each escaped to two characters in the stored envelope.
    const atLimit = [exactly("a"), exactly("\\\"")];
    try {
      for (const body of atLimit) {
        expect(Buffer.byteLength(body)).to.equal(1_048_576);
        await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(body)).send(body).expect(200);
      }
      await eventually(() => seen.received.length === 2);
      expect(seen.received.map((m) => m.data.body === atLimit[0] || m.data.body === atLimit[1])).to.deep.equal([true, true]);
      expect(seen.received.map((m) => m.headers["Content-Encoding"])).to.deep.equal(["gzip", "gzip"]);
    } finally {
      await seen.close();
    }
    const over = JSON.stringify({ object: "x", entry: [], pad: "x".repeat(1_100_000) });
    const res = await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(over)).send(over).expect(413);
    expect(res.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
  });

  it("stores a batch of inbound messages only on provider.messages.v1 and status callbacks on provider.inbound.v1", async () => {
    const messagesSeen = await collectSubject(h.env.natsUrl, `${h.env.namespace}.provider.messages.v1`);
    const inboundSeen = await collectSubject(h.env.natsUrl, `${h.env.namespace}.provider.inbound.v1`);
    const sign = (raw: string) => "sha256=" + createHmac("sha256", "dev-app-secret").update(raw).digest("hex");
    const batch = (value: unknown) => JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "waba", changes: [{ field: "messages", value }] }] });
    const messages = batch({ metadata: { phone_number_id: "pn-route" }, messages: [{ from: "15550001", id: "wamid.route.1", timestamp: "1", type: "text", text: { body: "hi" } }] });
    const statuses = batch({ metadata: { phone_number_id: "pn-route" }, statuses: [{ id: "wamid.route.2", status: "delivered", timestamp: "1", recipient_id: "15550001" }] });
    for (const body of [messages, statuses]) {
      await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(body)).send(body).expect(200);
    }
    await eventually(() => messagesSeen.received.length === 1 && inboundSeen.received.some((m) => m.data.body === statuses));
    expect(messagesSeen.received[0].data.body).to.equal(messages);
    expect(inboundSeen.received.map((m) => m.data.body)).to.not.include(messages);
    await messagesSeen.close();
    await inboundSeen.close();
  });

  it("drops a provider retry of a batch of messages and statuses (same bytes), but stores every delivery of a template's status change", async () => {
    const { bus } = h.replicas[0]!;
    const stream = bus.streamName(STREAMS.provider);
    const stored = async (subject: string) => {
      const info = await bus.jsm.streams.info(stream, { subjects_filter: bus.subject(subject) });
      return info.state.subjects?.[bus.subject(subject)] ?? 0;
    };
    const sign = (raw: string) => "sha256=" + createHmac("sha256", "dev-app-secret").update(raw).digest("hex");
    const post = (body: string) => request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(body)).send(body).expect(200);
    const statuses = JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "waba", changes: [{ field: "messages", value: { metadata: { phone_number_id: "pn-dup" }, statuses: [{ id: "wamid.dup.1", status: "read", timestamp: "1", recipient_id: "15550001" }] } }] }] });
    const template = (event: string) =>
      JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "waba_dup", changes: [{ field: "message_template_status_update", value: { event, message_template_id: 9901, message_template_name: "dup", message_template_language: "en", reason: "NONE" } }] }] });
    const before = await stored(SUBJECTS.providerInbound.subject);
    await post(statuses);
    await post(statuses);
    // APPROVED, PAUSED, then APPROVED again: the same bytes as the first, a new change.
    await post(template("APPROVED"));
    await post(template("PAUSED"));
    await post(template("APPROVED"));
    expect((await stored(SUBJECTS.providerInbound.subject)) - before).to.equal(1 + 3);
  });

  it("stores signed provider batches on JetStream before answering 200, and refuses bad signatures", async () => {
    const seen = await collectSubject(h.env.natsUrl, `${h.env.namespace}.provider.inbound.v1`);
    const body = JSON.stringify({ object: "whatsapp_business_account", entry: [] });
    const sig = "sha256=" + createHmac("sha256", "dev-app-secret").update(body).digest("hex");
    await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", sig).send(body).expect(200);
    await eventually(() => seen.received.length === 1);
    expect(seen.received[0].data.body).to.equal(body);
    const bad = await request(h.url)
      .post("/provider/webhooks")
      .set("Content-Type", "application/json")
      .set("X-Hub-Signature-256", "sha256=" + "0".repeat(64))
      .send(body)
      .expect(401);
    expect(bad.body.error.code).to.equal("UNAUTHORIZED");
    await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").send(body).expect(401);
    // The right digest written otherwise than the provider writes it (lowercase hex, nothing between it and `=`; the
    // whitespace around a header value is not part of it in HTTP).
    const hex = sig.slice("sha256=".length);
    for (const variant of [`sha256=${hex.toUpperCase()}`, `sha256= ${hex}`, `SHA256=${hex}`]) {
      await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", variant).send(body).expect(401);
    }
    // A later good batch on the same path as a marker: once it is seen, the refused ones would have been too.
    const marker = JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "marker", changes: [] }] });
    const markerSig = "sha256=" + createHmac("sha256", "dev-app-secret").update(marker).digest("hex");
    await request(h.url).post("/provider/webhooks").set("Content-Type", "application/json").set("X-Hub-Signature-256", markerSig).send(marker).expect(200);
    await eventually(() => seen.received.length >= 2);
    expect(seen.received.map((m) => m.data.body)).to.deep.equal([body, marker]);
    await seen.close();
  });

  it("an Idempotency-Key is the organization's: on the other keyed endpoint within 24 hours it is 422 IDEMPOTENCY_KEY_REUSED, unseen by the service", async () => {
    const a = await h.organization({ plan: "growth" });
    const b = await h.organization({ plan: "growth" });
    const key = `order-${Math.random().toString(36).slice(2)}`;
    const post = (o: { key: string }, path: string, idempotencyKey?: string) => {
      const req = request(h.url).post(path).set("Authorization", `Bearer ${o.key}`);
      return (idempotencyKey === undefined ? req : req.set("Idempotency-Key", idempotencyKey)).send({ to: "+15550001111", text: "hi" });
    };
    expect((await post(a, "/api/v1/messages", key)).body.url).to.equal("/api/v1/messages");
    // The same endpoint again, in any spelling: the service's to answer (a replay, or 422 for another body).
    expect((await post(a, "/API/V1/Messages/", key)).status).to.equal(200);
    for (const path of ["/api/v1/templates/send", "/api/v1/Templates//Send/"]) {
      const res = await post(a, path, key);
      expect(res.status, path).to.equal(422);
      expect(res.body.error.code, path).to.equal("IDEMPOTENCY_KEY_REUSED");
      expect(res.body).to.not.have.property("url");
    }
    // Another organization's key of the same spelling is its own; requests without a key, or with one the service
    // refuses as malformed, and reads are not looked at.
    expect((await post(b, "/api/v1/templates/send", key)).status).to.equal(200);
    expect((await post(a, "/api/v1/templates/send")).status).to.equal(200);
    expect((await post(a, "/api/v1/templates/send", "x".repeat(256))).status).to.equal(200);
    expect((await request(h.url).get("/api/v1/contacts").set("Authorization", `Bearer ${a.key}`).set("Idempotency-Key", key)).status).to.equal(200);
    // After 24 hours the key is free for either endpoint, and the next use binds it again.
    await h.db.query(`UPDATE gateway.idempotency_scopes SET expires_at = now() - interval '1 second' WHERE organization_id = $1`, [a.id]);
    expect((await post(a, "/api/v1/templates/send", key)).status).to.equal(200);
    expect((await post(a, "/api/v1/messages", key)).status).to.equal(422);
    // Expired keys are swept.
    await h.db.query(`UPDATE gateway.idempotency_scopes SET expires_at = now() - interval '1 second' WHERE organization_id = $1`, [b.id]);
    expect(await h.replicas[0].gateway.idempotency.sweep()).to.be.at.least(1);
    const left: Array<{ organization_id: string }> = await h.db.query(`SELECT organization_id FROM gateway.idempotency_scopes WHERE key = $1`, [key]);
    expect(left.map((r) => r.organization_id)).to.deep.equal([a.id]);
  });
});

describe("gateway: the provider's batches on their node:http front answer as express did", () => {
  const h = new GatewayHarness();
  const sign = (raw: string | Buffer) => "sha256=" + createHmac("sha256", "dev-app-secret").update(raw).digest("hex");
  before(async () => {
    await h.start({});
  });
  after(async () => {
    await h.stop();
  });

  it("every spelling, encoding and failure of a batch: the same status, envelope and stored bodies on the front and on express", async () => {
    const seen = await collectSubject(h.env.natsUrl, `${h.env.namespace}.provider.inbound.v1`);
    const body = (tag: string) => JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: tag, changes: [] }] });
    // The front takes `/provider/webhooks` exactly; express takes the other spellings and encoded bodies.
    const plain = body("plain");
    const res = await request(h.url).post("/provider/webhooks?x=1").set("Content-Type", "application/json").set("X-Request-Id", "prov-7").set("X-Hub-Signature-256", sign(plain)).send(plain).expect(200);
    expect(res.body).to.deep.equal({ received: true });
    expect(res.headers["content-type"]).to.equal("application/json; charset=utf-8");
    expect(res.headers["x-request-id"]).to.equal("prov-7");
    const slash = body("slash");
    await request(h.url).post("/Provider/Webhooks/").set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(slash)).send(slash).expect(200);
    const gz = body("gzip");
    await request(h.url).post("/provider/webhooks").set("Content-Type", "application/octet-stream").set("Content-Encoding", "gzip").set("X-Hub-Signature-256", sign(gz)).send(gzipSync(gz)).expect(200);
    // Any content type is a batch (the network's is application/json, but the signature is what counts).
    const text = body("text");
    await request(h.url).post("/provider/webhooks").set("Content-Type", "text/plain").set("X-Hub-Signature-256", sign(text)).send(text).expect(200);

    for (const path of ["/provider/webhooks", "/provider/webhooks/"]) {
      const bad = await request(h.url).post(path).set("Content-Type", "application/json").set("X-Hub-Signature-256", sign("other")).send(plain).expect(401);
      expect(bad.body.error.code).to.equal("UNAUTHORIZED");
      expect(bad.headers["x-request-id"]).to.be.a("string");
      const notJson = "{not json";
      expect((await request(h.url).post(path).set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(notJson)).send(notJson).expect(400)).body.error.code).to.equal("INVALID_JSON");
      const large = JSON.stringify({ object: "x", entry: [], pad: "x".repeat(1_100_000) });
      expect((await request(h.url).post(path).set("Content-Type", "application/json").set("X-Hub-Signature-256", sign(large)).send(large).expect(413)).body.error.code).to.equal("PAYLOAD_TOO_LARGE");
      const empty = await request(h.url).post(path).set("X-Hub-Signature-256", sign("")).expect(400);
      expect(empty.body.error.code).to.equal("INVALID_JSON");
    }
    await eventually(() => seen.received.length >= 4);
    expect(seen.received.map((m) => m.data.body).sort()).to.deep.equal([plain, slash, gz, text].sort());
    await seen.close();
  });

  it("counts the front's answers in the metrics under the route's name", async () => {
    const ok = JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "metrics", changes: [] }] });
    await request(h.url).post("/provider/webhooks").set("X-Hub-Signature-256", sign(ok)).send(ok).expect(200);
    const metrics = await request(h.url).get("/metrics").expect(200);
    expect(metrics.text).to.match(/http_request_duration_seconds_count\{[^}]*route="\/provider\/webhooks"[^}]*status="200"/);
  });
});

describe("gateway: answers that no cache may keep", () => {
  const h = new GatewayHarness();
  let echo: Awaited<ReturnType<typeof echoServer>>;
  before(async () => {
    echo = await echoServer();
    await h.start({ CONTACTS_URL: echo.url, MESSAGING_URL: echo.url });
  });
  after(async () => {
    await h.stop();
    await echo.close();
  });

  it("every /api/v1 and /admin/v1 answer, proxied, local or refused, says Cache-Control: no-store; none says X-Powered-By", async () => {
    const a = await h.organization();
    const auth = { Authorization: `Bearer ${a.key}` };
    const answers = {
      "ping": await request(h.url).get("/api/v1/ping").set(auth).expect(200),
      "proxied": await request(h.url).get("/api/v1/contacts").set(auth).expect(200),
      "no key": await request(h.url).get("/api/v1/ping").expect(401),
      "no route": await request(h.url).get("/api/v1/nope").set(auth).expect(404),
      "admin": await h.admin().post("/admin/v1/organizations").send({ name: "Cached?" }).expect(201),
      "no admin token": await request(h.url).get("/admin/v1/organizations").expect(401),
    };
    for (const [what, res] of Object.entries(answers)) {
      expect(res.headers["cache-control"], what).to.equal("no-store");
      expect(res.headers).to.not.have.property("x-powered-by");
    }
  });
});
