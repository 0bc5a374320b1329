import { expect } from "chai";
import { api, harness, newOrg, newPhone, registerChannel, resolveContact } from "./harness";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function walk(org: string, limit?: number) {
  const items: any[] = [];
  const pages: number[] = [];
  let cursor: string | undefined;
  do {
    const qs = new URLSearchParams();
    if (limit !== undefined) qs.set("limit", String(limit));
    if (cursor) qs.set("cursor", cursor);
    const res = await api(org).get(`/api/v1/contacts?${qs}`);
    expect(res.status).to.equal(200);
    items.push(...res.body.items);
    pages.push(res.body.items.length);
    cursor = res.body.nextCursor;
  } while (cursor);
  return { items, pages };
}

describe("contacts: resolve and list (happy paths)", () => {
  it("resolveContact creates one contact per (organization, phone) and keeps name and waId", async () => {
    const org = newOrg();
    const phone = newPhone();
    const first = await resolveContact(org, phone);
    expect(first.created).to.equal(true);
    expect(first.contactId).to.match(/^ct_/);
    const again = await resolveContact(org, phone);
    expect(again).to.deep.equal({ contactId: first.contactId, phone, created: false });
    const named = await resolveContact(org, phone, { name: "Ana", waId: phone.slice(1) });
    expect(named.contactId).to.equal(first.contactId);
    // A later call without them keeps them.
    await resolveContact(org, phone);

    const res = await api(org).get("/api/v1/contacts");
    expect(res.status).to.equal(200);
    expect(res.body).to.not.have.property("nextCursor");
    expect(res.body.items).to.have.length(1);
    const [c] = res.body.items;
    expect(c).to.deep.include({ id: first.contactId, phone, name: "Ana", waId: phone.slice(1), isOptedOut: false, optedOutChannelIds: [] });
    expect(c.createdAt).to.match(ISO_MS);
    expect(c.updatedAt).to.match(ISO_MS);
    expect(Date.parse(c.updatedAt)).to.be.at.least(Date.parse(c.createdAt));
    expect(c).to.not.have.property("email");
  });

  it("omits unknown optional fields (never null)", async () => {
    const org = newOrg();
    await resolveContact(org, newPhone());
    const res = await api(org).get("/api/v1/contacts");
    const [c] = res.body.items;
    expect(Object.keys(c).sort()).to.deep.equal(["createdAt", "id", "isOptedOut", "optedOutChannelIds", "phone", "updatedAt"]);
  });

  it("normalizes the phone it is given", async () => {
    const org = newOrg();
    const a = await resolveContact(org, "+1 415-555-0199");
    const b = await resolveContact(org, "0014155550199");
    expect(b.contactId).to.equal(a.contactId);
    expect(a.phone).to.equal("+14155550199");
  });

  it("two resolvers racing on a new number make one contact", async () => {
    const org = newOrg();
    const phone = newPhone();
    const answers = await Promise.all(Array.from({ length: 10 }, () => resolveContact(org, phone)));
    expect(new Set(answers.map((a) => a.contactId)).size).to.equal(1);
    expect(answers.filter((a) => a.created)).to.have.length(1);
  });

  it("a contact's updatedAt moves with its opt-outs (set, cleared), since isOptedOut is part of it", async () => {
    const org = newOrg();
    const a = registerChannel(org);
    const phone = newPhone();
    await resolveContact(org, phone, { name: "Ana" });
    const contact = async () => (await api(org).get("/api/v1/contacts")).body.items[0] as { updatedAt: string; isOptedOut: boolean };
    const record = async () => (await api(org).get(`/admin/v1/organizations/${org}/opt-outs?phone=${encodeURIComponent(phone)}`).expect(200)).body.items[0] as { updatedAt: string };
    const before = await contact();
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: a.id, phone }).expect(200);
    const set = await contact();
    expect(set.isOptedOut).to.equal(true);
    expect(set.updatedAt).to.equal((await record()).updatedAt);
    expect(Date.parse(set.updatedAt)).to.be.at.least(Date.parse(before.updatedAt));
    await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: a.id, phone }).expect(200);
    const cleared = await contact();
    expect(cleared.isOptedOut).to.equal(false);
    expect(cleared.updatedAt).to.equal((await record()).updatedAt);
  });

  it("isOptedOut and optedOutChannelIds list the channels with an active opt-out", async () => {
    const org = newOrg();
    const a = registerChannel(org);
    const b = registerChannel(org, { isDefault: false });
    const phone = newPhone();
    await resolveContact(org, phone);
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: a.id, phone }).expect(200);
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: b.id, phone }).expect(200);
    let [c] = (await api(org).get("/api/v1/contacts")).body.items;
    expect(c.isOptedOut).to.equal(true);
    expect(c.optedOutChannelIds).to.have.members([a.id, b.id]);

    await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: a.id, phone }).expect(200);
    [c] = (await api(org).get("/api/v1/contacts")).body.items;
    expect(c.optedOutChannelIds).to.deep.equal([b.id]);

    await api(org).post("/api/v1/opt-outs", { action: "clear", messagingChannelId: b.id, phone }).expect(200);
    [c] = (await api(org).get("/api/v1/contacts")).body.items;
    expect(c.isOptedOut).to.equal(false);
    expect(c.optedOutChannelIds).to.deep.equal([]);
  });

  it("pages in (createdAt, id) order, default limit 25, nextCursor absent at the end", async () => {
    const org = newOrg();
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push((await resolveContact(org, newPhone())).contactId);
    const first = await api(org).get("/api/v1/contacts");
    expect(first.body.items).to.have.length(25);
    expect(first.body.nextCursor).to.be.a("string");

    const { items, pages } = await walk(org);
    expect(pages).to.deep.equal([25, 25, 10]);
    expect(items.map((c) => c.id)).to.deep.equal(ids);
    const keys = items.map((c) => [c.createdAt, c.id]);
    const sorted = [...keys].sort((x, y) => (x[0] === y[0] ? (x[1] < y[1] ? -1 : 1) : x[0] < y[0] ? -1 : 1));
    expect(keys).to.deep.equal(sorted);

    const exact = await walk(org, 60);
    expect(exact.pages).to.deep.equal([60]);
    const byOne = await walk(org, 100);
    expect(byOne.items).to.have.length(60);
  });

  it("limit 1 and limit 100 are accepted; an empty organization answers no items and no cursor", async () => {
    const org = newOrg();
    const empty = await api(org).get("/api/v1/contacts?limit=100");
    expect(empty.status).to.equal(200);
    expect(empty.body).to.deep.equal({ items: [] });
    await resolveContact(org, newPhone());
    await resolveContact(org, newPhone());
    const one = await api(org).get("/api/v1/contacts?limit=1");
    expect(one.body.items).to.have.length(1);
    expect(one.body.nextCursor).to.be.a("string");
    const last = await api(org).get(`/api/v1/contacts?limit=1&cursor=${encodeURIComponent(one.body.nextCursor)}`);
    expect(last.body.items).to.have.length(1);
    expect(last.body).to.not.have.property("nextCursor");
  });

  it("ties on createdAt are ordered by id", async () => {
    const org = newOrg();
    const db = harness().svc.deps.db;
    // Several contacts in one statement share created_at (one transaction's now()).
    const phones = Array.from({ length: 7 }, () => newPhone());
    const ids = phones.map((_, i) => `ct_tie${String(i).padStart(3, "0")}`).reverse();
    await db.query(
      `INSERT INTO contacts.contacts (id, organization_id, phone) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])`,
      [ids, phones.map(() => org), phones],
    );
    const { items } = await walk(org, 2);
    expect(new Set(items.map((c) => c.createdAt)).size).to.equal(1);
    expect(items.map((c) => c.id)).to.deep.equal([...ids].sort());
  });
});
