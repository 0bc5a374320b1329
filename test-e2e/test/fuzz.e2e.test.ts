import { createHmac } from "node:crypto";
import http from "node:http";
import { expect } from "chai";
import fc from "fast-check";
import { z } from "zod";
import {
  AcceptInvitationRequest,
  ConsoleUpdateOrganizationRequest,
  CreateApiKeyRequest,
  CreateChannelRequest,
  CreateInvitationRequest,
  CreateOrganizationRequest,
  CreateTemplateRequest,
  CreateUserRequest,
  CreateWebhookRequest,
  ErrorCode,
  ManualOptOutRequest,
  OptOutRequest,
  SignInRequest,
  TemplateSendJobRequest,
  UpdateChannelRequest,
  UpdateOrganizationRequest,
  UpdateTemplateRequest,
  UpdateUserRoleRequest,
  UpdateWebhookRequest,
} from "@platform/contracts";
import { E2E } from "./stack";

/**
 * Property-based fuzzing of every public route (issue: proof under fire).
 * Operations come from the served OpenAPI document (`/api/v1`), from the
 * contract's admin table (`/admin/v1`, bodies from the contracts' zod
 * schemas), the provider webhook and the console's API (`/console/api`,
 * signed in as an Owner of a third organization: session cookie, CSRF
 * token and Origin, or a broken one of them). Each run builds one request: a body
 * that follows the schema, or one mutated away from it (wrong types,
 * missing and extra fields, huge and deeply nested values), sent as JSON,
 * another content type or invalid UTF-8, with odd headers and hostile
 * strings in every parameter. The property: never a 5xx, every 4xx in the
 * contract's envelope with a listed code, and every process still up.
 *
 * FUZZ_RUNS sets the count (CI's `npm run test:fuzz` runs 20,000; `npm test`
 * a quick 400); FUZZ_SEED replays a run exactly.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 400);
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_124);

type JsonSchema = { [k: string]: any };
interface Operation {
  method: string;
  path: string;
  auth: "api" | "admin" | "provider" | "console";
  query: string[];
  body?: JsonSchema;
}

const HOSTILE = [
  "../../../../etc/passwd",
  "..%2f..%2fadmin%2fv1",
  "%2e%2e/%2e%2e/",
  "' OR '1'='1",
  "1; DROP TABLE messages;--",
  '"; SELECT pg_sleep(5); --',
  "<script>alert(1)</script>",
  "${jndi:ldap://127.0.0.1/x}",
  "{{7*7}}",
  "$where",
  "__proto__",
  "constructor",
  "%00",
  "%ff%fe",
  "\u202e\u0000",
  "😀".repeat(50),
  "a".repeat(5_000),
  " ",
  "",
  "-1",
  "1e309",
  "NaN",
  "null",
];

/** Webhook URLs the fuzz may create: never one that leaves this machine (a `.invalid` host never resolves). */
const SAFE_URLS = ["https://hooks.invalid/x", "http://127.0.0.1:9/x", "https://10.0.0.1/x", "ftp://x", "not a url", ""];

const hostile = fc.constantFrom(...HOSTILE);
const weirdString = fc.oneof(fc.string(), fc.string({ unit: "binary" }), hostile, fc.string({ minLength: 0, maxLength: 40, unit: "grapheme" }));

/** A value of the schema's type, mostly inside its bounds. */
function valid(schema: JsonSchema, defs: Record<string, JsonSchema>, depth = 0): fc.Arbitrary<unknown> {
  if (schema.$ref) return valid(defs[String(schema.$ref).split("/").pop()!] ?? {}, defs, depth);
  if (schema.anyOf || schema.oneOf) return fc.oneof(...(schema.anyOf ?? schema.oneOf).map((s: JsonSchema) => valid(s, defs, depth)));
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "string":
      if (schema.format === "uri" || /url/i.test(schema.description ?? "")) return fc.constantFrom(...SAFE_URLS);
      return fc.oneof(
        fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 60) }),
        fc.constantFrom("+15550001111", "15550001111", "+1 (555) 000-1111", "0044 20 7946 0958", "ch_x", "2026-01-01", "2026-01-01T00:00:00Z"),
      );
    case "integer":
      return fc.integer({ min: schema.minimum ?? -10, max: Math.min(schema.maximum ?? 1_000, 100_000) });
    case "number":
      return fc.double({ min: schema.minimum ?? -10, max: schema.maximum ?? 1_000, noNaN: true });
    case "boolean":
      return fc.boolean();
    case "array":
      return depth > 3 ? fc.constant([]) : fc.array(valid(schema.items ?? {}, defs, depth + 1), { maxLength: 4 });
    case "object": {
      if (depth > 3) return fc.constant({});
      const props: Record<string, JsonSchema> = schema.properties ?? {};
      const required = new Set<string>(schema.required ?? []);
      return fc.record(
        Object.fromEntries(Object.entries(props).map(([k, s]) => [k, valid(s, defs, depth + 1)])),
        { requiredKeys: Object.keys(props).filter((k) => required.has(k) || k === "url") },
      );
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** The schema's value pushed off it: a field dropped, retyped or added; or any JSON at all; or huge or deep. */
function body(schema: JsonSchema | undefined, defs: Record<string, JsonSchema>): fc.Arbitrary<unknown> {
  const base = schema ? valid(schema, defs) : fc.constant({});
  const mutated = fc
    .tuple(base, fc.nat(), fc.oneof(fc.jsonValue({ maxDepth: 2 }), weirdString, fc.constant(null)), fc.constantFrom("drop", "retype", "extra"))
    .map(([value, n, other, how]) => {
      if (!value || typeof value !== "object" || Array.isArray(value)) return other;
      const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
      const keys = Object.keys(copy);
      const key = keys.length ? keys[n % keys.length] : "x";
      if (how === "drop") delete copy[key];
      else if (how === "retype") copy[key] = other;
      else copy[`extra_${n % 5}`] = other;
      return copy;
    });
  const deep = fc.integer({ min: 50, max: 5_000 }).map((n) => JSON.parse("[".repeat(Math.min(n, 500)) + "]".repeat(Math.min(n, 500))));
  return fc.oneof(
    { weight: 4, arbitrary: base },
    { weight: 4, arbitrary: mutated },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
    { weight: 1, arbitrary: deep },
  );
}

/** How the body travels: JSON, JSON one nesting level too deep for any parser, other types, broken bytes. */
const encoding = fc.constantFrom("json", "json", "json", "json", "text", "form", "latin1", "none", "invalid-utf8", "truncated", "deep-text", "huge");

function encode(value: unknown, how: string): { bytes?: Buffer; type?: string } {
  const json = JSON.stringify(value) ?? "null";
  switch (how) {
    case "json":
      return { bytes: Buffer.from(json), type: "application/json" };
    case "text":
      return { bytes: Buffer.from(json), type: "text/plain" };
    case "form":
      return { bytes: Buffer.from("a=1&b=%00"), type: "application/x-www-form-urlencoded" };
    case "latin1":
      return { bytes: Buffer.from(json, "latin1"), type: "application/json; charset=iso-8859-1" };
    case "none":
      return { bytes: Buffer.from(json) };
    case "invalid-utf8":
      return { bytes: Buffer.concat([Buffer.from('{"to":"'), Buffer.from([0xff, 0xfe, 0xc0, 0x80]), Buffer.from('"}')]), type: "application/json" };
    case "truncated":
      return { bytes: Buffer.from(json.slice(0, Math.max(1, json.length - 1))), type: "application/json" };
    case "deep-text":
      return { bytes: Buffer.from("[".repeat(100_000) + "]".repeat(100_000)), type: "application/json" };
    default:
      return { bytes: Buffer.from(JSON.stringify({ blob: "x".repeat(1_100_000) })), type: "application/json" };
  }
}

const CONSOLE_PASSWORD = "correct horse battery staple";

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function send(base: string, method: string, path: string, headers: Record<string, string>, bytes?: Buffer) {
  return new Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const url = new URL(base);
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), headers: res.headers }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(bytes);
  });
}

const input = (schema: z.ZodType) => z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema;

describe("e2e: fuzzing every route", function () {
  this.timeout(Math.max(300_000, RUNS * 200));
  const e2e = new E2E();
  before(() => e2e.start({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "false", CONSOLE_SCRYPT_COST: "12" }));
  after(() => e2e.stop());

  it(`never answers 5xx, always the contract's envelope, and no process dies (${RUNS} runs, seed ${SEED})`, async () => {
    const spec = (await (await fetch(`${e2e.stack.url}/api-reference/openapi.json`)).json()) as { paths: Record<string, Record<string, any>>; components?: { schemas?: Record<string, JsonSchema> } };
    const defs: Record<string, JsonSchema> = spec.components?.schemas ?? {};
    const operations: Operation[] = [];
    for (const [path, ops] of Object.entries<Record<string, any>>(spec.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        const query = (op.parameters ?? []).filter((p: any) => p.in === "query").map((p: any) => p.name);
        operations.push({ method: method.toUpperCase(), path, auth: "api", query, body: op.requestBody?.content?.["application/json"]?.schema });
      }
    }
    expect(operations.length, "the served document lists the /api/v1 operations").to.be.greaterThan(4);
    const org = "/admin/v1/organizations/{orgId}";
    const admin: Array<[string, string, z.ZodType?]> = [
      ["POST", "/admin/v1/organizations", CreateOrganizationRequest],
      ["GET", "/admin/v1/organizations", undefined],
      ["PATCH", org, UpdateOrganizationRequest],
      ["GET", org, undefined],
      ["POST", `${org}/channels`, CreateChannelRequest],
      ["GET", `${org}/channels`, undefined],
      ["PATCH", `${org}/channels/{channelId}`, UpdateChannelRequest],
      ["POST", `${org}/api-keys`, CreateApiKeyRequest],
      ["GET", `${org}/api-keys`, undefined],
      ["DELETE", `${org}/api-keys/{keyId}`, undefined],
      ["POST", `${org}/webhooks`, CreateWebhookRequest],
      ["GET", `${org}/webhooks`, undefined],
      ["PATCH", `${org}/webhooks/{webhookId}`, UpdateWebhookRequest],
      ["DELETE", `${org}/webhooks/{webhookId}`, undefined],
      ["POST", `${org}/webhooks/{webhookId}/test`, undefined],
      ["GET", `${org}/webhooks/{webhookId}/deliveries`, undefined],
      ["POST", `${org}/opt-outs`, ManualOptOutRequest],
      ["GET", `${org}/opt-outs`, undefined],
      ["POST", `${org}/users`, CreateUserRequest],
      ["GET", `${org}/users`, undefined],
    ];
    // Templates are administered once their service serves them (its operations are in the document then).
    const templates = Object.keys(spec.paths).some((p) => p.startsWith("/api/v1/templates"));
    if (templates) {
      admin.push(
        ["POST", `${org}/templates`, CreateTemplateRequest],
        ["GET", `${org}/templates`, undefined],
        ["PATCH", `${org}/templates/{templateId}`, UpdateTemplateRequest],
        ["GET", `${org}/template-jobs`, undefined],
      );
    }
    for (const [method, path, schema] of admin) {
      operations.push({ method, path, auth: "admin", query: method === "GET" ? ["limit", "cursor"] : [], body: schema ? input(schema) : undefined });
    }
    operations.push({ method: "POST", path: "/provider/webhooks", auth: "provider", query: [] });
    operations.push({ method: "GET", path: "/provider/webhooks", auth: "provider", query: ["hub.mode", "hub.verify_token", "hub.challenge"] });
    // The console's API: its own routes and those it rebuilds for a service. Not the sign-out: the session must last the run.
    const consoleOps: Array<[string, string, z.ZodType?, string[]?]> = [
      ["POST", "/console/api/session", SignInRequest],
      ["GET", "/console/api/session"],
      ["POST", "/console/api/invitations/accept", AcceptInvitationRequest],
      ["GET", "/console/api/organization"],
      ["PATCH", "/console/api/organization", ConsoleUpdateOrganizationRequest],
      ["GET", "/console/api/users"],
      ["PATCH", "/console/api/users/{userId}", UpdateUserRoleRequest],
      ["DELETE", "/console/api/users/{userId}"],
      ["GET", "/console/api/invitations"],
      ["POST", "/console/api/invitations", CreateInvitationRequest],
      ["DELETE", "/console/api/invitations/{invitationId}"],
      ["GET", "/console/api/api-keys", undefined, ["limit", "cursor"]],
      ["POST", "/console/api/api-keys", CreateApiKeyRequest],
      ["DELETE", "/console/api/api-keys/{keyId}"],
      ["GET", "/console/api/channels"],
      ["POST", "/console/api/channels", CreateChannelRequest],
      ["PATCH", "/console/api/channels/{channelId}", UpdateChannelRequest],
      ["GET", "/console/api/webhooks"],
      ["POST", "/console/api/webhooks", CreateWebhookRequest],
      ["PATCH", "/console/api/webhooks/{webhookId}", UpdateWebhookRequest],
      ["DELETE", "/console/api/webhooks/{webhookId}"],
      ["POST", "/console/api/webhooks/{webhookId}/test"],
      ["GET", "/console/api/webhooks/{webhookId}/deliveries", undefined, ["limit", "cursor"]],
      ["POST", "/console/api/opt-outs/actions", OptOutRequest],
      ["POST", "/console/api/opt-outs", ManualOptOutRequest],
      ["GET", "/console/api/opt-outs", undefined, ["phone"]],
      ["GET", "/console/api/contacts", undefined, ["limit", "cursor"]],
      ["GET", "/console/api/conversations", undefined, ["limit", "cursor"]],
      ["GET", "/console/api/analytics", undefined, ["from", "to", "granularity", "messagingChannelId"]],
    ];
    if (templates) {
      consoleOps.push(
        ["GET", "/console/api/templates", undefined, ["limit", "cursor"]],
        ["POST", "/console/api/templates", CreateTemplateRequest],
        ["PATCH", "/console/api/templates/{templateId}", UpdateTemplateRequest],
        ["GET", "/console/api/template-jobs", undefined, ["limit", "cursor"]],
        ["POST", "/console/api/template-jobs", TemplateSendJobRequest],
        ["GET", "/console/api/template-jobs/{jobId}"],
        ["POST", "/console/api/template-jobs/{jobId}/cancel"],
      );
    }
    for (const [method, path, schema, query] of consoleOps) {
      operations.push({ method, path, auth: "console", query: query ?? [], body: schema ? input(schema) : undefined });
    }

    // The integrator's organization (a limit the fuzz cannot exhaust) and a second one the admin calls act on.
    const caller = await e2e.organization({ rateLimit: { perSecond: 100_000, burst: 100_000 } });
    const target = await e2e.organization();
    const channel = await e2e.admin("POST", `/admin/v1/organizations/${target.id}/channels`, {
      name: "Fuzz",
      phoneNumber: "+15550100000",
      providerPhoneNumberId: `pnfuzz${Date.now()}`,
    });
    expect(channel.status).to.equal(201);
    // The console's organization, its Owner signed in for the whole run.
    const consoleOrg = await e2e.organization();
    const email = `fuzz-owner-${Date.now()}@example.com`;
    const owner = await e2e.admin("POST", `/admin/v1/organizations/${consoleOrg.id}/users`, { email, password: CONSOLE_PASSWORD, role: "owner" });
    expect(owner.status, JSON.stringify(owner.body)).to.equal(201);
    const signIn = await fetch(`${e2e.stack.url}/console/api/session`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: e2e.stack.url },
      body: JSON.stringify({ email, password: CONSOLE_PASSWORD }),
    });
    expect(signIn.status).to.equal(201);
    const session = { cookie: signIn.headers.getSetCookie()[0].split(";")[0], csrf: ((await signIn.json()) as { csrfToken: string }).csrfToken };
    const consoleChannel = await e2e.admin("POST", `/admin/v1/organizations/${consoleOrg.id}/channels`, {
      name: "Fuzz console",
      phoneNumber: "+15550100001",
      providerPhoneNumberId: `pnfuzzc${Date.now()}`,
    });
    expect(consoleChannel.status).to.equal(201);
    const realIds = [target.id, caller.id, channel.body.id, target.keyId, consoleOrg.id, consoleChannel.body.id, consoleOrg.keyId];
    const param = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...realIds) }, { weight: 2, arbitrary: hostile }, { weight: 1, arbitrary: fc.string({ maxLength: 30 }) });
    // A path segment as sent: a value percent-encoded (slashes kept), or in 1 of 13 bytes that are not valid percent-encoding.
    const segment = fc.oneof(
      { weight: 12, arbitrary: param.map((v) => encodeURIComponent(v).replace(/%2F/gi, "/")) },
      { weight: 1, arbitrary: fc.constantFrom("%ZZ", "%E0%A4%A", "%", "ok%C3", "%FF%FE", "%c0%af", "%u0041") },
    );
    const bearer = (v: string | undefined): Record<string, string> => (v === undefined ? {} : { Authorization: v });
    const signedIn = { Cookie: session.cookie, "X-CSRF-Token": session.csrf, Origin: e2e.stack.url };
    const authHeaders = (op: Operation): fc.Arbitrary<Record<string, string>> =>
      op.auth === "console"
        ? fc.oneof(
            { weight: 8, arbitrary: fc.constant(signedIn) },
            {
              weight: 1,
              arbitrary: fc.constantFrom<Record<string, string>>(
                {},
                { Cookie: session.cookie, Origin: e2e.stack.url },
                { ...signedIn, "X-CSRF-Token": "forged" },
                { ...signedIn, Origin: "https://evil.example" },
                { ...signedIn, Cookie: "platform_session=forged" },
                { ...signedIn, Cookie: `${session.cookie}; ${session.cookie}x` },
                { ...signedIn, Authorization: `Bearer ${caller.key}` },
              ),
            },
          )
        : fc.oneof(
            { weight: 8, arbitrary: fc.constant(bearer(op.auth === "admin" ? `Bearer ${e2e.stack.adminToken}` : op.auth === "api" ? `Bearer ${caller.key}` : undefined)) },
            { weight: 1, arbitrary: fc.constantFrom(undefined, "Bearer", "Basic YTpi", `bearer  ${caller.key}`, `Bearer ${"x".repeat(9_000)}`, `Bearer svc_${"\u00e9".repeat(20)}`).map(bearer) },
          );
    const extraHeaders = fc.record(
      {
        "Idempotency-Key": fc.oneof(fc.string({ maxLength: 20 }), fc.constant("k".repeat(300)), hostile),
        "X-Organization-Id": fc.constantFrom(target.id, "org_x"),
        "X-Internal-Token": fc.constant("forged"),
        "X-Request-Id": fc.oneof(fc.string({ maxLength: 10 }), fc.constant("r".repeat(500))),
        "X-Forwarded-For": fc.constant("10.0.0.1, 127.0.0.1"),
        Accept: fc.constantFrom("*/*", "text/html", "application/xml"),
        Expect: fc.oneof({ weight: 9, arbitrary: fc.constant("100-continue") }, { weight: 1, arbitrary: fc.constant("something-else") }),
        "Content-Encoding": fc.oneof({ weight: 9, arbitrary: fc.constant("identity") }, { weight: 1, arbitrary: fc.constantFrom("gzip", "br", "x-unknown") }),
      },
      { requiredKeys: [] },
    );

    const request = fc
      .nat({ max: operations.length - 1 })
      .chain((i) => {
        const op = operations[i];
        const names = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        return fc.record({
          op: fc.constant(op),
          params: fc.tuple(...names.map(() => segment)),
          query: fc.array(fc.tuple(fc.constantFrom(...(op.query.length ? op.query : ["x"])), fc.oneof(fc.constantFrom("1", "25", "100", "0", "101", "1e2", "0x10", "-1", ""), hostile)), { maxLength: 3 }),
          body: body(op.body, defs),
          encoding,
          auth: authHeaders(op),
          headers: extraHeaders,
          sign: fc.boolean(),
        });
      });

    const allowed = new Set<string>(ErrorCode.options.filter((c) => c !== "INTERNAL_ERROR"));
    /** Answers by kind of caller and status ("console 201"). */
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        let i = 0;
        const path = r.op.path.replace(/\{\w+\}/g, () => r.params[i++] as string);
        const qs = r.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
        const withBody = r.op.method !== "GET" && r.op.method !== "DELETE";
        const encoded = withBody ? encode(r.body, r.encoding) : {};
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) if (v !== undefined) headers[k] = String(v).replace(/[^\x20-\x7e]/g, "?");
        for (const [k, v] of Object.entries(r.auth)) headers[k] = v.replace(/[^\x20-\x7e]/g, "?");
        if (encoded.type) headers["Content-Type"] = encoded.type;
        if (r.op.auth === "provider" && encoded.bytes && r.sign) {
          headers["X-Hub-Signature-256"] = `sha256=${createHmac("sha256", e2e.stack.env.PROVIDER_APP_SECRET ?? "dev-app-secret").update(encoded.bytes).digest("hex")}`;
        }
        const res = await send(e2e.stack.url, r.op.method, qs ? `${path}?${qs}` : path, headers, encoded.bytes);
        const kind = `${r.op.auth} ${res.status}`;
        seen.set(kind, (seen.get(kind) ?? 0) + 1);
        const what = `${r.op.method} ${`${path}${qs ? `?${qs}` : ""}`.slice(0, 200)} (${r.encoding}) → ${res.status} ${res.text.slice(0, 300)}`;
        expect(res.status, what).to.be.below(500);
        expect(res.headers, what).to.not.have.property("x-powered-by");
        if (res.status >= 400) {
          const parsed = JSON.parse(res.text);
          expect(Object.keys(parsed), what).to.deep.equal(["error"]);
          expect(allowed.has(parsed.error.code), what).to.equal(true);
          expect(parsed.error.message, what).to.be.a("string");
          if (parsed.error.code === "VALIDATION_ERROR") expect(parsed.error.details, what).to.be.an("array").that.is.not.empty;
          expect(res.text, what).to.not.match(/\n\s+at |node_modules|QueryFailedError/);
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );

    for (const name of e2e.stack.names()) expect(e2e.stack.restarts(name), `${name} restarted during the fuzz`).to.equal(0);
    const ready = await fetch(`${e2e.stack.url}/readyz`);
    expect(ready.status, "every service still ready").to.equal(200);
    if (process.env.FUZZ_VERBOSE) process.stdout.write(`statuses: ${JSON.stringify([...seen].sort())}\n`);
    // The fuzz reached past validation too: some requests of the integrator, the operator and the console were accepted.
    for (const auth of ["api", "admin", "console"]) {
      const accepted = [...seen.keys()].some((k) => k.startsWith(`${auth} `) && Number(k.split(" ")[1]) < 300);
      expect(accepted, `${auth}: statuses seen: ${JSON.stringify([...seen])}`).to.equal(true);
    }
  });
});
