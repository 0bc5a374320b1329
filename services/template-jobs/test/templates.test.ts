import { expect } from "chai";
import { eventually } from "@platform/testing";
import { api, createTemplate, eventsOf, newOrg, sharedHarness, TEMPLATE_ACCOUNT_ID, uniqueProviderTemplateId, type Harness } from "./helpers/harness";

describe("templates: admin API, list, provider status updates", function () {
  this.timeout(60_000);
  let h: Harness;
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarness();
  });

  it("creates a template (201) with every field, numeric provider ids as strings", async () => {
    const org = newOrg();
    const res = await api(h, org)
      .post(`/admin/v1/organizations/${org}/templates`)
      .send({ name: "welcome", language: "en_US", category: "MARKETING", status: "approved", bodyParameterCount: 2, providerTemplateId: 987654321, templateAccountId: "waba_9", headerFormat: "image" });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body).to.include({ name: "welcome", language: "en_US", category: "MARKETING", status: "approved", bodyParameterCount: 2, providerTemplateId: "987654321", templateAccountId: "waba_9", headerFormat: "image" });
    expect(res.body.id).to.match(/^tpl_/);
    // Created and last updated at the same instant (the two column defaults once read two clocks, a few ms apart).
    expect(res.body.updatedAt).to.equal(res.body.createdAt);
    for (let i = 0; i < 5; i++) {
      const t = (await api(h, org).post(`/admin/v1/organizations/${org}/templates`).send({ name: `t${i}`, language: "en", status: "approved", bodyParameterCount: 0, providerTemplateId: uniqueProviderTemplateId(), templateAccountId: "a" })).body;
      expect(t.updatedAt, `template ${i}`).to.equal(t.createdAt);
    }
  });

  it("refuses a taken provider template id in the organization (409 CONFLICT) and bad fields (400)", async () => {
    const org = newOrg();
    const t = await createTemplate(h, org);
    const dup = await api(h, org).post(`/admin/v1/organizations/${org}/templates`).send({ name: "x", language: "en", status: "approved", bodyParameterCount: 0, providerTemplateId: t.providerTemplateId, templateAccountId: "a" });
    expect(dup.status).to.equal(409);
    expect(dup.body.error.code).to.equal("CONFLICT");
    // Another organization may hold the same provider id.
    await createTemplate(h, newOrg(), { providerTemplateId: t.providerTemplateId });
    const bad = await api(h, org).post(`/admin/v1/organizations/${org}/templates`).send({ name: "", language: "en", status: "live", bodyParameterCount: 21, providerTemplateId: "abc", templateAccountId: "a", headerFormat: "gif" });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.details.map((d: { path: string }) => d.path)).to.include.members(["name", "status", "bodyParameterCount", "providerTemplateId", "headerFormat"]);
  });

  it("lists templates with cursor pagination, per organization", async () => {
    const org = newOrg();
    const created = [];
    for (let i = 0; i < 5; i++) created.push(await createTemplate(h, org));
    await createTemplate(h, newOrg());
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const res = await api(h, org).get(`/api/v1/templates?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status).to.equal(200);
      seen.push(...res.body.items.map((t: { id: string }) => t.id));
      cursor = res.body.nextCursor;
    } while (cursor);
    expect(seen).to.deep.equal(created.map((t) => t.id));
    const admin = await api(h, org).get(`/admin/v1/organizations/${org}/templates?limit=100`);
    expect(admin.body.items).to.have.length(5);
    const other = await api(h, newOrg()).get(`/api/v1/templates?limit=2&cursor=${encodeURIComponent((await api(h, org).get("/api/v1/templates?limit=1")).body.nextCursor)}`);
    expect(other.status).to.equal(400);
    expect(other.body.error.code).to.equal("INVALID_CURSOR");
    expect((await api(h, org).get("/api/v1/templates?limit=101")).status).to.equal(400);
  });

  it("applies the provider's message_template_status_update and emits template.status_updated once, with the old status", async () => {
    const org = newOrg();
    const t = await createTemplate(h, org, { status: "pending" });
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: Number(t.providerTemplateId), name: t.name, language: t.language, event: "APPROVED" });
    const [event] = await eventually(() => {
      const found = eventsOf(h, "template.status_updated", (d) => d.templateId === t.id);
      return found.length ? found : undefined;
    });
    expect(event.organizationId).to.equal(org);
    expect(event.data).to.include({ templateId: t.id, providerTemplateId: t.providerTemplateId, name: t.name, language: t.language, status: "approved", previousStatus: "pending", reason: null });
    // The same update again (a provider retry with a new body) changes nothing and emits nothing.
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: Number(t.providerTemplateId), name: t.name, language: t.language, event: "APPROVED" });
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: Number(t.providerTemplateId), name: t.name, language: t.language, event: "REJECTED", reason: "INVALID_FORMAT" });
    const events = await eventually(() => {
      const found = eventsOf(h, "template.status_updated", (d) => d.templateId === t.id);
      return found.length === 2 ? found : undefined;
    });
    expect(events[1].data).to.include({ status: "rejected", previousStatus: "approved", reason: "INVALID_FORMAT" });
    const list = await api(h, org).get("/api/v1/templates");
    expect(list.body.items[0].status).to.equal("rejected");
  });

  it("ignores status updates of another account's template with the same provider id", async () => {
    const org = newOrg();
    const providerTemplateId = uniqueProviderTemplateId();
    const t = await createTemplate(h, org, { status: "approved", providerTemplateId, templateAccountId: "other_account" });
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: Number(providerTemplateId), name: t.name, language: t.language, event: "PAUSED" });
    // A later update of the right account is applied, so the first one was consumed (and ignored) before it.
    await h.sim.injectTemplateStatus({ templateAccountId: "other_account", providerTemplateId: Number(providerTemplateId), name: t.name, language: t.language, event: "DISABLED" });
    const events = await eventually(() => {
      const found = eventsOf(h, "template.status_updated", (d) => d.templateId === t.id);
      return found.length ? found : undefined;
    });
    expect(events.map((e) => e.data.status)).to.deep.equal(["disabled"]);
    expect(events[0].data.previousStatus).to.equal("approved");
  });

  it("stores a provider PENDING update but emits no template.status_updated for it (the event's statuses are approved, rejected, paused, disabled)", async () => {
    const org = newOrg();
    const t = await createTemplate(h, org, { status: "approved" });
    // The provider's PENDING (the simulator's helper models the four decisions only): its signed batch, as it sends it.
    const status = await h.sim.postRaw({
      object: "whatsapp_business_account",
      entry: [{ id: TEMPLATE_ACCOUNT_ID, changes: [{ field: "message_template_status_update", value: {
        event: "PENDING", message_template_id: Number(t.providerTemplateId), message_template_name: t.name, message_template_language: t.language,
      } }] }],
    });
    expect(status).to.equal(200);
    await eventually(async () => (await api(h, org).get("/api/v1/templates")).body.items[0].status === "pending");
    // A later decision is announced (from pending), so the PENDING one was handled, and emitted nothing, before it.
    await h.sim.injectTemplateStatus({ templateAccountId: TEMPLATE_ACCOUNT_ID, providerTemplateId: Number(t.providerTemplateId), name: t.name, language: t.language, event: "APPROVED" });
    const events = await eventually(() => {
      const found = eventsOf(h, "template.status_updated", (d) => d.templateId === t.id);
      return found.length ? found : undefined;
    });
    expect(events.map((e) => e.data)).to.deep.equal([{ ...events[0].data, status: "approved", previousStatus: "pending" }]);
  });

  it("a template deleted at the provider (PENDING_DELETION, DELETED) is disabled; FLAGGED and LIMIT_EXCEEDED change nothing", async () => {
    const raw = (t: { providerTemplateId: string; name: string; language: string }, event: string) =>
      h.sim.postRaw({
        object: "whatsapp_business_account",
        entry: [{ id: TEMPLATE_ACCOUNT_ID, changes: [{ field: "message_template_status_update", value: {
          event, message_template_id: Number(t.providerTemplateId), message_template_name: t.name, message_template_language: t.language,
        } }] }],
      });
    for (const deletion of ["PENDING_DELETION", "DELETED"]) {
      const org = newOrg();
      const t = await createTemplate(h, org, { status: "approved" });
      // Warnings first: a later decision's previousStatus shows they were handled and left the template approved.
      expect(await raw(t, "FLAGGED")).to.equal(200);
      expect(await raw(t, "LIMIT_EXCEEDED")).to.equal(200);
      expect(await raw(t, deletion)).to.equal(200);
      const events = await eventually(() => {
        const found = eventsOf(h, "template.status_updated", (d) => d.templateId === t.id);
        return found.length ? found : undefined;
      });
      expect(events.map((e) => e.data), deletion).to.deep.equal([{ ...events[0].data, status: "disabled", previousStatus: "approved" }]);
    }
  });

  it("PATCH status pending is stored and emits nothing", async () => {
    const org = newOrg();
    const t = await createTemplate(h, org, { status: "approved" });
    const res = await api(h, org).patch(`/admin/v1/organizations/${org}/templates/${t.id}`).send({ status: "pending" });
    expect(res.status).to.equal(200);
    expect(res.body.status).to.equal("pending");
    await api(h, org).patch(`/admin/v1/organizations/${org}/templates/${t.id}`).send({ status: "rejected" });
    const events = await eventually(() => {
      const found = eventsOf(h, "template.status_updated", (d) => d.templateId === t.id);
      return found.length ? found : undefined;
    });
    expect(events.map((e) => [e.data.previousStatus, e.data.status])).to.deep.equal([["pending", "rejected"]]);
    expect(eventsOf(h, "template.status_updated", (d) => d.status === "pending")).to.have.length(0);
  });

  it("PATCH status in the admin API (the Settings screen) has the same effect", async () => {
    const org = newOrg();
    const t = await createTemplate(h, org, { status: "approved" });
    const res = await api(h, org).patch(`/admin/v1/organizations/${org}/templates/${t.id}`).send({ status: "paused" });
    expect(res.status).to.equal(200);
    expect(res.body.status).to.equal("paused");
    await eventually(() => eventsOf(h, "template.status_updated", (d) => d.templateId === t.id && d.status === "paused").length === 1);
    const other = await api(h, newOrg()).patch(`/admin/v1/organizations/x/templates/${t.id}`).send({ status: "approved" });
    expect(other.status).to.equal(404);
    expect(other.body.error.code).to.equal("TEMPLATE_NOT_FOUND");
  });
});
