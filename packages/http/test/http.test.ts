import { gzipSync } from "node:zlib";
import { expect } from "chai";
import express from "express";
import request from "supertest";
import { z } from "zod";
import { createLogger } from "@platform/logging";
import { ApiError, CursorCodec, createServiceApp, organizationOf, parseBody, parseQuery, zodDetails } from "../src";

/** Sends bytes as they are: superagent would JSON-serialize a Buffer sent with a JSON content type. */
const raw = (bytes: Buffer) => bytes as unknown as string;

const log = createLogger("http-test", "silent");

function app() {
  const routes = express.Router();
  routes.post("/things", (req, res) => {
    const body = parseBody(z.object({ name: z.string().min(1), items: z.array(z.object({ n: z.number() })).optional() }), req);
    res.json({ body, org: organizationOf(res) });
  });
  routes.get("/things", (req, res) => {
    res.json(parseQuery(z.object({ limit: z.coerce.number().int().min(1).max(100).default(25) }), req));
  });
  routes.get("/things/:id", (req, res) => {
    res.json({ id: req.params.id });
  });
  routes.get("/boom", () => {
    throw new Error("secret internals");
  });
  routes.get("/teapot", () => {
    throw new ApiError("CONTACT_OPTED_OUT", "Contact opted out");
  });
  return createServiceApp({ service: "t", log, internalToken: "internal-token-123456", readiness: {}, routes });
}

const internal = { "x-internal-token": "internal-token-123456", "x-organization-id": "org_1" };

describe("http kit", () => {
  it("refuses calls without the internal token", async () => {
    const res = await request(app()).get("/things").expect(401);
    expect(res.body.error.code).to.equal("UNAUTHORIZED");
    await request(app()).get("/things").set("x-internal-token", "wrong-token-000000000").expect(401);
  });

  it("answers VALIDATION_ERROR with dotted paths", async () => {
    const res = await request(app()).post("/things").set(internal).send({ name: "", items: [{ n: 1 }, { n: "x" }] }).expect(400);
    expect(res.body.error.code).to.equal("VALIDATION_ERROR");
    expect(res.body.error.details.map((d: { path: string }) => d.path)).to.deep.equal(["name", "items.1.n"]);
  });

  it("prefixes query paths with query.", async () => {
    const res = await request(app()).get("/things?limit=500").set(internal).expect(400);
    expect(res.body.error.details[0].path).to.equal("query.limit");
    await request(app()).get("/things?limit=1&limit=2").set(internal).expect(400);
    expect((await request(app()).get("/things").set(internal).expect(200)).body).to.deep.equal({ limit: 25 });
  });

  it("refuses NUL characters (Postgres cannot store them) in bodies, keys and URLs with VALIDATION_ERROR", async () => {
    let res = await request(app()).post("/things").set(internal).send({ name: "a\u0000b" }).expect(400);
    expect(res.body.error.details).to.deep.equal([{ path: "name", message: "must not contain NUL (\\u0000) characters" }]);
    res = await request(app()).post("/things").set(internal).send({ name: "ok", items: [{ n: 1, "k\u0000": 2 }] }).expect(400);
    expect(res.body.error.details[0].path).to.equal("items.0");
    res = await request(app()).post("/things").set(internal).send({ name: "ok", items: [{ n: 1 }, { tags: ["a", "b\u0000"] }] }).expect(400);
    expect(res.body.error.details[0].path).to.equal("items.1.tags.1");
    res = await request(app()).get("/things?limit=%00").set(internal).expect(400);
    expect(res.body.error.details[0].path).to.equal("url");
    await request(app()).get("/things/%00").set(internal).expect(400);
    await request(app()).get("/things/%00").expect(401);
  });

  it("refuses bytes that are not UTF-8 with INVALID_JSON and lone surrogates with VALIDATION_ERROR, never storing U+FFFD", async () => {
    const latin = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"}')]);
    let res = await request(app()).post("/things").set(internal).set("Content-Type", "application/json").serialize(raw).send(latin).expect(400);
    expect(res.body).to.deep.equal({ error: { code: "INVALID_JSON", message: "The body is not UTF-8 JSON" } });
    res = await request(app()).post("/things").set(internal).set("Content-Type", "application/json").set("Content-Encoding", "gzip").serialize(raw).send(gzipSync(latin)).expect(400);
    expect(res.body.error.code).to.equal("INVALID_JSON");
    res = await request(app()).post("/things").set(internal).set("Content-Type", "application/json").send('{"name":"a\\ud800b"}').expect(400);
    expect(res.body.error.details).to.deep.equal([{ path: "name", message: "must be valid Unicode (no unpaired surrogate \\uD800-\\uDFFF)" }]);
    res = await request(app()).post("/things").set(internal).set("Content-Type", "application/json").send('{"name":"ok","items":[{"n":1,"\\udc00":2}]}').expect(400);
    expect(res.body.error.details[0].path).to.equal("items.0");
    // A surrogate pair is one character (U+1F600), UTF-8 of every plane is fine.
    res = await request(app()).post("/things").set(internal).set("Content-Type", "application/json").send('{"name":"\\ud83d\\ude00 é 中"}').expect(200);
    expect(res.body.body.name).to.equal("\u{1F600} é 中");
  });

  it("takes large bodies on the routes given for them only, counting the inflated size", async () => {
    const routes = express.Router();
    routes.post(["/big", "/small"], (req, res) => res.json({ length: JSON.stringify(req.body).length }));
    const big = createServiceApp({ service: "t", log, internalToken: "internal-token-123456", readiness: {}, routes, largeBodies: { limit: "4mb", method: "POST", path: /^\/big$/ } });
    const body = JSON.stringify({ pad: "x".repeat(2_000_000) });
    await request(big).post("/big").set(internal).set("Content-Type", "application/json").send(body).expect(200);
    await request(big).post("/big").set(internal).set("Content-Type", "application/json").set("Content-Encoding", "gzip").serialize(raw).send(gzipSync(body)).expect(200);
    let res = await request(big).post("/small").set(internal).set("Content-Type", "application/json").send(body).expect(413);
    expect(res.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
    // 2 MB inflated from a few KB on the wire: the limit is the body's, not the wire's.
    res = await request(big).post("/small").set(internal).set("Content-Type", "application/json").set("Content-Encoding", "gzip").serialize(raw).send(gzipSync(body)).expect(413);
    expect(res.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
    await request(big).post("/big").set(internal).set("Content-Type", "application/json").send(JSON.stringify({ pad: "x".repeat(4_200_000) })).expect(413);
  });

  it("answers a path parameter that is not valid percent-encoding with VALIDATION_ERROR, not a 500", async () => {
    expect((await request(app()).get("/things/a%20b").set(internal).expect(200)).body).to.deep.equal({ id: "a b" });
    for (const bad of ["%ZZ", "%E0%A4%A", "%", "ok%C3"]) {
      const res = await request(app()).get(`/things/${bad}`).set(internal).expect(400);
      expect(res.body, bad).to.deep.equal({
        error: { code: "VALIDATION_ERROR", message: "The request path is not valid percent-encoding", details: [{ path: "url", message: "is not valid percent-encoding" }] },
      });
    }
  });

  it("answers INVALID_JSON, PAYLOAD_TOO_LARGE and a missing body", async () => {
    let res = await request(app()).post("/things").set(internal).set("Content-Type", "application/json").send("{oops").expect(400);
    expect(res.body.error.code).to.equal("INVALID_JSON");
    res = await request(app()).post("/things").set(internal).send({ name: "x".repeat(2_000_000) }).expect(413);
    expect(res.body.error.code).to.equal("PAYLOAD_TOO_LARGE");
    res = await request(app()).post("/things").set(internal).set("Content-Type", "text/plain").send("name=x").expect(400);
    expect(res.body.error.code).to.equal("VALIDATION_ERROR");
  });

  it("answers ApiErrors with their status and unknown errors as a bare 500 envelope", async () => {
    const res = await request(app()).get("/teapot").set(internal).expect(403);
    expect(res.body).to.deep.equal({ error: { code: "CONTACT_OPTED_OUT", message: "Contact opted out" } });
    const boom = await request(app()).get("/boom").set(internal).expect(500);
    expect(boom.body).to.deep.equal({ error: { code: "INTERNAL_ERROR", message: "Internal error" } });
  });

  it("answers 404 envelopes and echoes request ids", async () => {
    const res = await request(app()).get("/nope").set(internal).set("X-Request-Id", "abc-123").expect(404);
    expect(res.body.error.code).to.equal("NOT_FOUND");
    expect(res.headers["x-request-id"]).to.equal("abc-123");
  });

  it("serves probes and metrics without the token", async () => {
    await request(app()).get("/healthz").expect(200);
    await request(app()).get("/readyz").expect(200);
    const metrics = await request(app()).get("/metrics").expect(200);
    expect(metrics.text).to.include("process_cpu_user_seconds_total");
  });
});

describe("CursorCodec", () => {
  const codec = new CursorCodec<{ id: string }>("key-1", "things");
  const isPos = (p: unknown): p is { id: string } => typeof (p as { id?: unknown })?.id === "string";

  it("round-trips a position", () => {
    expect(codec.decode(codec.encode({ id: "x" }), isPos)).to.deep.equal({ id: "x" });
  });

  it("refuses tampered, foreign and malformed cursors with INVALID_CURSOR", () => {
    const good = codec.encode({ id: "x" });
    const [body, sig] = good.split(".");
    const tampered = Buffer.from(JSON.stringify({ k: "things", p: { id: "y" } })).toString("base64url") + "." + sig;
    const foreign = new CursorCodec<{ id: string }>("key-2", "things").encode({ id: "x" });
    const otherKind = new CursorCodec<{ id: string }>("key-1", "others").encode({ id: "x" });
    for (const bad of [tampered, foreign, otherKind, "abc", `${body}.`, `${good}.x`]) {
      expect(() => codec.decode(bad, isPos), bad).to.throw(ApiError).with.property("code", "INVALID_CURSOR");
    }
  });
});

describe("zodDetails", () => {
  it("lists each (path, message) once: two checks saying the same thing give one detail", () => {
    const schema = z.object({ limit: z.string().regex(/^[0-9]+$/, "must be 1 to 100").refine((v) => Number(v) <= 100, "must be 1 to 100") });
    const parsed = schema.safeParse({ limit: "x" + "9".repeat(20) });
    expect(parsed.success).to.equal(false);
    expect(parsed.error!.issues.length, "the schema's own issues").to.equal(2);
    expect(zodDetails(parsed.error!, "query")).to.deep.equal([{ path: "query.limit", message: "must be 1 to 100" }]);
  });
});
