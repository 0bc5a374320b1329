import { expect } from "chai";
import request from "supertest";
import { CursorCodec } from "@platform/http";
import { api, harness, newOrg, newPhone, resolveContact } from "./harness";

describe("contacts list: invalid queries and cursors", () => {
  // Only a plain decimal integer from 1 to 100 is a limit (no exponent, hex, sign, fraction or spaces).
  for (const limit of ["0", "101", "-1", "abc", "2.5", "", "1e2", "0x10", "1.0", "+5", "%205"]) {
    it(`400 VALIDATION_ERROR at query.limit for limit=${JSON.stringify(limit)}`, async () => {
      const res = await api(newOrg()).get(`/api/v1/contacts?limit=${limit}`);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details[0].path).to.equal("query.limit");
    });
  }

  it("400 VALIDATION_ERROR for a repeated limit", async () => {
    const res = await api(newOrg()).get(`/api/v1/contacts?limit=1&limit=2`);
    expect(res.status).to.equal(400);
    expect(res.body.error.details[0].path).to.equal("query.limit");
  });

  async function aCursor(org: string) {
    await resolveContact(org, newPhone());
    await resolveContact(org, newPhone());
    const res = await api(org).get("/api/v1/contacts?limit=1");
    return res.body.nextCursor as string;
  }

  it("400 INVALID_CURSOR for a cursor that this service did not issue", async () => {
    const org = newOrg();
    for (const cursor of ["abc", "abc.def", "a.b.c", "eyJrIjoiY29udGFjdHMudjEifQ.xxxxxxxxxxxxxxxxxxxxxx", "%00", "🙂"]) {
      const res = await api(org).get(`/api/v1/contacts?cursor=${encodeURIComponent(cursor)}`);
      expect(res.status, cursor).to.equal(400);
      expect(res.body.error.code, cursor).to.equal("INVALID_CURSOR");
    }
  });

  it("400 INVALID_CURSOR for a tampered cursor", async () => {
    const org = newOrg();
    const cursor = await aCursor(org);
    const [body, sig] = cursor.split(".");
    const decoded = JSON.parse(Buffer.from(body, "base64url").toString());
    decoded.p.t = "1970-01-01T00:00:00.000Z";
    const forged = `${Buffer.from(JSON.stringify(decoded)).toString("base64url")}.${sig}`;
    const flipped = `${body}.${sig.slice(0, -1)}${sig.endsWith("A") ? "B" : "A"}`;
    for (const bad of [forged, flipped, `${body}.`, `.${sig}`, `${cursor}.x`]) {
      const res = await api(org).get(`/api/v1/contacts?cursor=${encodeURIComponent(bad)}`);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal("INVALID_CURSOR");
    }
  });

  it("400 INVALID_CURSOR for a correctly signed cursor with a malformed position", async () => {
    const org = newOrg();
    const codec = new CursorCodec<object>(harness().env.internalToken, "contacts.v1");
    for (const p of [{}, { o: org, t: "not a date", i: "ct_x" }, { o: org, t: "2026-01-01T00:00:00.000Z" }, { o: org, t: 5, i: "x" }]) {
      const res = await api(org).get(`/api/v1/contacts?cursor=${encodeURIComponent(codec.encode(p))}`);
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal("INVALID_CURSOR");
    }
  });

  it("400 INVALID_CURSOR for a cursor issued to another organization", async () => {
    const cursor = await aCursor(newOrg());
    const res = await api(newOrg()).get(`/api/v1/contacts?cursor=${encodeURIComponent(cursor)}`);
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal("INVALID_CURSOR");
  });

  it("401 without the internal token", async () => {
    const res = await request(harness().svc.url).get("/api/v1/contacts").set("x-organization-id", newOrg());
    expect(res.status).to.equal(401);
    expect(res.body.error.code).to.equal("UNAUTHORIZED");
  });
});
