import { expect } from "chai";
import { Bus } from "@platform/bus";
import { RPC, SUBJECTS } from "@platform/contracts";
import { createLogger } from "@platform/logging";
import { collectSubject, eventually } from "@platform/testing";
import { api, newOrg, sharedHarness, uniquePhoneNumberId, type Harness } from "./helpers/harness";

describe("admin channels", () => {
  let h: Harness;
  let sys: Awaited<ReturnType<typeof collectSubject>>;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
    sys = await collectSubject(h.env.natsUrl, `${h.env.namespace}.${SUBJECTS.channelUpserted.subject}`);
  });
  after(async () => sys.close());

  const create = (org: string, body: Record<string, unknown>) => api(h, org).post(`/admin/v1/organizations/${org}/channels`).send(body);

  it("creates a channel (201): E.164 phone, defaults, first one is the default, channel.upserted published", async () => {
    const org = newOrg();
    const pnid = uniquePhoneNumberId();
    const res = await create(org, { name: "Sales", phoneNumber: "00 44 20 7946 0958", providerPhoneNumberId: pnid });
    expect(res.status).to.equal(201);
    expect(res.body).to.include({ name: "Sales", phoneNumber: "+442079460958", providerPhoneNumberId: pnid, connected: true, isDefault: true, messagesPerSecond: 80 });
    expect(res.body.id).to.match(/^ch_/);
    expect(new Date(res.body.createdAt).toISOString()).to.equal(res.body.createdAt);
    const published = await eventually(() => sys.received.find((m) => m.data.id === res.body.id));
    expect(published.data).to.include({ organizationId: org, isDefault: true, providerPhoneNumberId: pnid });
  });

  it("keeps at most one default: isDefault on create or patch moves it; list returns all", async () => {
    const org = newOrg();
    const a = (await create(org, { name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: uniquePhoneNumberId() })).body;
    const b = (await create(org, { name: "B", phoneNumber: "+14155550002", providerPhoneNumberId: uniquePhoneNumberId(), messagesPerSecond: 5 })).body;
    expect(b).to.include({ isDefault: false, messagesPerSecond: 5 });
    const c = (await create(org, { name: "C", phoneNumber: "+14155550003", providerPhoneNumberId: uniquePhoneNumberId(), isDefault: true, connected: false })).body;
    expect(c).to.include({ isDefault: true, connected: false });
    let list = (await api(h, org).get(`/admin/v1/organizations/${org}/channels`)).body.items;
    expect(list.map((x: { id: string }) => x.id)).to.deep.equal([a.id, b.id, c.id]);
    expect(list.filter((x: { isDefault: boolean }) => x.isDefault).map((x: { id: string }) => x.id)).to.deep.equal([c.id]);

    const patched = await api(h, org).patch(`/admin/v1/organizations/${org}/channels/${b.id}`).send({ isDefault: true, name: "B2", messagesPerSecond: 10, connected: false });
    expect(patched.status).to.equal(200);
    expect(patched.body).to.include({ id: b.id, name: "B2", isDefault: true, messagesPerSecond: 10, connected: false });
    list = (await api(h, org).get(`/admin/v1/organizations/${org}/channels`)).body.items;
    expect(list.filter((x: { isDefault: boolean }) => x.isDefault).map((x: { id: string }) => x.id)).to.deep.equal([b.id]);
    // The old default's change is published too, so copies elsewhere do not keep two defaults.
    await eventually(() => sys.received.some((m) => m.data.id === c.id && m.data.isDefault === false));
  });

  it("lists with the cursor pagination of /api/v1: limit, nextCursor, INVALID_CURSOR", async () => {
    const org = newOrg();
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await create(org, { name: `P${n}`, phoneNumber: `+1415555001${n}`, providerPhoneNumberId: uniquePhoneNumberId() })).body.id);
    const path = `/admin/v1/organizations/${org}/channels`;
    const first = (await api(h, org).get(`${path}?limit=2`)).body;
    expect(first.items.map((x: { id: string }) => x.id)).to.deep.equal(ids.slice(0, 2));
    expect(first.nextCursor).to.be.a("string");
    const second = (await api(h, org).get(`${path}?limit=2&cursor=${encodeURIComponent(first.nextCursor)}`)).body;
    expect(second.items.map((x: { id: string }) => x.id)).to.deep.equal([ids[2]]);
    expect(second).to.not.have.property("nextCursor");
    expect((await api(h, org).get(path)).body.items).to.have.length(3);

    const badLimit = await api(h, org).get(`${path}?limit=0`);
    expect([badLimit.status, badLimit.body.error.details[0].path]).to.deep.equal([400, "query.limit"]);
    for (const cursor of ["junk", "", "x".repeat(600)]) {
      const bad = await api(h, org).get(`${path}?cursor=${cursor}`);
      expect([bad.status, bad.body.error.code], `cursor ${cursor.slice(0, 8)}`).to.deep.equal([400, "INVALID_CURSOR"]);
    }
    // Another organization's cursor is not one issued to this one.
    const foreign = await api(h, newOrg()).get(`/admin/v1/organizations/x/channels?cursor=${encodeURIComponent(first.nextCursor)}`);
    expect([foreign.status, foreign.body.error.code]).to.deep.equal([400, "INVALID_CURSOR"]);
  });

  it("answers RPC.lookupChannel for the organization only", async () => {
    const org = newOrg();
    const ch = (await create(org, { name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: uniquePhoneNumberId() })).body;
    const bus = await Bus.connect({ url: h.env.natsUrl, namespace: h.env.namespace, name: "lookup-test", log: createLogger("t", "silent") });
    try {
      const found = await bus.request(RPC.lookupChannel, { organizationId: org, channelId: ch.id });
      expect(found.channel).to.include({ id: ch.id, organizationId: org, providerPhoneNumberId: ch.providerPhoneNumberId });
      const foreign = await bus.request(RPC.lookupChannel, { organizationId: newOrg(), channelId: ch.id });
      expect(foreign.channel).to.equal(null);
    } finally {
      await bus.close();
    }
  });
});

describe("admin channels (errors)", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });
  const create = (org: string, body: unknown) => api(h, org).post(`/admin/v1/organizations/${org}/channels`).send(body as object);

  it("409 CONFLICT when providerPhoneNumberId is taken, in any organization", async () => {
    const pnid = uniquePhoneNumberId();
    expect((await create(newOrg(), { name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: pnid })).status).to.equal(201);
    const again = await create(newOrg(), { name: "B", phoneNumber: "+14155550002", providerPhoneNumberId: pnid });
    expect(again.status).to.equal(409);
    expect(again.body.error.code).to.equal("CONFLICT");
  });

  it("400 VALIDATION_ERROR on bad fields", async () => {
    const org = newOrg();
    const cases: Array<[unknown, string]> = [
      [{ phoneNumber: "+14155550001", providerPhoneNumberId: "x" }, "name"],
      [{ name: "A", phoneNumber: "nope", providerPhoneNumberId: "x" }, "phoneNumber"],
      [{ name: "A", phoneNumber: "+14155550001" }, "providerPhoneNumberId"],
      [{ name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: "x", messagesPerSecond: 0 }, "messagesPerSecond"],
      [{ name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: "x", messagesPerSecond: 1001 }, "messagesPerSecond"],
      [{ name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: "x", connected: "yes" }, "connected"],
    ];
    for (const [body, path] of cases) {
      const res = await create(org, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
    }
    expect((await api(h, org).get(`/admin/v1/organizations/${org}/channels`)).body.items).to.deep.equal([]);
  });

  it("PATCH of an unknown or foreign channel is 404, never 403", async () => {
    const owner = newOrg();
    const ch = (await create(owner, { name: "A", phoneNumber: "+14155550001", providerPhoneNumberId: uniquePhoneNumberId() })).body;
    const other = newOrg();
    const res = await api(h, other).patch(`/admin/v1/organizations/${other}/channels/${ch.id}`).send({ name: "stolen" });
    expect(res.status).to.equal(404);
    expect(res.body.error.code).to.equal("CHANNEL_NOT_FOUND");
    const bad = await api(h, owner).patch(`/admin/v1/organizations/${owner}/channels/${ch.id}`).send({ messagesPerSecond: "fast" });
    expect(bad.status).to.equal(400);
  });
});
