import { expect } from "chai";
import { CONTACTS_RPC, RPC } from "@platform/contracts";
import { z } from "zod";
import { RpcCallError } from "@platform/bus";
import { api, checkOptOuts, harness, newOrg, newPhone, registerChannel, resolveContact } from "./harness";

describe("bus responders: resolveContact and checkOptOuts", () => {
  it("checkOptOuts answers thousands of numbers in one request, only those opted out on that channel", async function () {
    this.timeout(30_000);
    const org = newOrg();
    const ch = registerChannel(org);
    const other = registerChannel(org, { isDefault: false });
    const phones = Array.from({ length: 20_000 }, (_, i) => `+1305${String(i).padStart(7, "0")}`);
    const opted = phones.filter((_, i) => i % 997 === 0);
    // Seeded directly: 21 opt-outs through the API would test the API, not the batch.
    await harness().svc.deps.db.query(
      `INSERT INTO contacts.opt_outs (id, organization_id, messaging_channel_id, phone, active, source)
       SELECT 'opt_b' || p, $1, $2, p, true, 'api' FROM unnest($3::text[]) p`,
      [org, ch.id, opted],
    );
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone: phones[1] }).expect(200);
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: other.id, phone: phones[2] }).expect(200);
    const answer = await checkOptOuts(org, ch.id, phones);
    expect([...answer].sort()).to.deep.equal([...opted, phones[1]].sort());
  });

  it("checkOptOuts answers an empty list when nothing is opted out, and ignores duplicates in the request", async () => {
    const org = newOrg();
    const ch = registerChannel(org);
    const phone = newPhone();
    expect(await checkOptOuts(org, ch.id, [phone, phone])).to.deep.equal([]);
    await api(org).post("/api/v1/opt-outs", { action: "set", messagingChannelId: ch.id, phone }).expect(200);
    expect(await checkOptOuts(org, ch.id, [phone, phone])).to.deep.equal([phone]);
  });

  it("an invalid request comes back as a non-retryable VALIDATION_ERROR", async () => {
    const bus = harness().bus;
    for (const bad of [
      () => bus.request(RPC.resolveContact, { organizationId: newOrg(), phone: "not a phone" }),
      () => bus.request(RPC.checkOptOuts, { organizationId: newOrg(), messagingChannelId: "ch_x", phones: [] }),
      // A payload without organizationId, sent around the client-side schema.
      () => bus.request({ subject: RPC.resolveContact.subject, request: z.unknown(), response: RPC.resolveContact.response }, { phone: "+14155550100" }),
    ]) {
      try {
        await bad();
        expect.fail("should have thrown");
      } catch (err) {
        expect(err).to.be.instanceOf(RpcCallError);
        expect((err as RpcCallError).code).to.equal("VALIDATION_ERROR");
        expect((err as RpcCallError).retryable).to.equal(false);
      }
    }
  });
});

describe("bus responder: resolveContacts (bulk, for template jobs)", () => {
  it("creates the new contacts in one request, reuses known ones, answers ids in request order", async () => {
    const org = newOrg();
    const known = newPhone();
    const knownContact = await resolveContact(org, known, { name: "Ana" });
    const fresh = Array.from({ length: 5_000 }, (_, i) => `+1786${String(i).padStart(7, "0")}`);
    const phones = [fresh[0], known, ...fresh, fresh[0]];
    const answer = await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: org, phones }, { timeoutMs: 20_000 });
    expect(answer.contactIds).to.have.length(phones.length);
    expect(answer.created).to.equal(5_000);
    expect(answer.contactIds[1]).to.equal(knownContact.contactId);
    expect(answer.contactIds[0]).to.equal(answer.contactIds[answer.contactIds.length - 1]);
    expect(new Set(answer.contactIds).size).to.equal(5_001);
    // The same numbers resolve to the same contacts, singly or in bulk.
    expect((await resolveContact(org, fresh[42])).contactId).to.equal(answer.contactIds[44]);
    const again = await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: org, phones: fresh.slice(0, 10) });
    expect(again).to.deep.equal({ contactIds: answer.contactIds.slice(2, 12), created: 0 });
  });

  it("concurrent bulk resolves of overlapping numbers make one contact per number", async () => {
    const org = newOrg();
    const phones = Array.from({ length: 2_000 }, (_, i) => `+1787${String(i).padStart(7, "0")}`);
    const answers = await Promise.all(
      [0, 1, 2, 3].map((k) =>
        harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: org, phones: k % 2 ? [...phones].reverse() : phones }, { timeoutMs: 20_000 }),
      ),
    );
    expect(answers.reduce((n, a) => n + a.created, 0)).to.equal(2_000);
    expect(answers[2].contactIds).to.deep.equal(answers[0].contactIds);
    expect([...answers[1].contactIds].reverse()).to.deep.equal(answers[0].contactIds);
    const [{ count }] = await harness().svc.deps.db.query(`SELECT count(*)::int AS count FROM contacts.contacts WHERE organization_id = $1`, [org]);
    expect(count).to.equal(2_000);
  });

  it("with names and waIds (inbound batches): keeps them like resolveContact, one contact per number under concurrent overlapping requests", async () => {
    const org = newOrg();
    const known = newPhone();
    const knownContact = await resolveContact(org, known, { name: "Old", waId: known.slice(1) });
    const phones = [known, ...Array.from({ length: 200 }, (_, i) => `+1789${String(i).padStart(7, "0")}`)];
    const request = (k: number) => {
      const order = k % 2 ? [...phones].reverse() : phones;
      return harness().bus.request(
        CONTACTS_RPC.resolveContacts,
        { organizationId: org, phones: order, names: order.map((p) => (p === known ? "New" : `N${p.slice(-3)}`)), waIds: order.map((p) => p.slice(1)) },
        { timeoutMs: 20_000 },
      );
    };
    const answers = await Promise.all([0, 1, 2, 3].map(request));
    expect(answers.reduce((n, a) => n + a.created, 0)).to.equal(200);
    expect(answers[0].contactIds[0]).to.equal(knownContact.contactId);
    expect(answers[2].contactIds).to.deep.equal(answers[0].contactIds);
    expect([...answers[1].contactIds].reverse()).to.deep.equal(answers[0].contactIds);
    const rows = await harness().svc.deps.db.query(`SELECT phone, name, wa_id FROM contacts.contacts WHERE organization_id = $1 ORDER BY phone`, [org]);
    expect(rows).to.have.length(201);
    for (const r of rows) expect(r).to.deep.include({ name: r.phone === known ? "New" : `N${r.phone.slice(-3)}`, wa_id: r.phone.slice(1) });
    // Unknown (null) names keep what is stored; a repeat changes nothing.
    const again = await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: org, phones: [known], names: [null], waIds: [null] });
    expect(again).to.deep.equal({ contactIds: [knownContact.contactId], created: 0 });
    const [{ name }] = await harness().svc.deps.db.query(`SELECT name FROM contacts.contacts WHERE organization_id = $1 AND phone = $2`, [org, known]);
    expect(name).to.equal("New");
  });

  it("refuses names or waIds not aligned with phones", async () => {
    try {
      await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: newOrg(), phones: [newPhone()], names: ["a", "b"] });
      expect.fail("should have thrown");
    } catch (err) {
      expect((err as RpcCallError).code).to.equal("VALIDATION_ERROR");
    }
  });

  it("refuses numbers that are not E.164 and more than 10,000 numbers", async () => {
    for (const phones of [["14155550100"], ["+0123"], Array.from({ length: 10_001 }, (_, i) => `+1788${String(i).padStart(7, "0")}`)]) {
      try {
        await harness().bus.request(CONTACTS_RPC.resolveContacts, { organizationId: newOrg(), phones });
        expect.fail("should have thrown");
      } catch (err) {
        expect((err as RpcCallError).code).to.equal("VALIDATION_ERROR");
      }
    }
  });
});
