import { expect } from "chai";
import { api, recipients, setup, sharedHarness, uniquePhone, type Harness } from "./helpers/harness";

/** GET /admin/v1/organizations/:orgId/template-jobs: the console's job list (issue 15). */
describe("GET /admin/v1/organizations/:orgId/template-jobs: the organization's jobs, newest first", function () {
  this.timeout(60_000);
  let h: Harness;
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarness();
  });

  const farFuture = () => new Date(Date.now() + 3_600_000).toISOString();
  const list = (org: string, query = "") => api(h, org).get(`/admin/v1/organizations/${org}/template-jobs${query}`);

  it("pages through every job newest first with their progress, and only the organization's own", async () => {
    const a = await setup(h);
    const b = await setup(h);
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api(h, a.org).post("/api/v1/templates/send").send({ templateId: a.template.id, messagingChannelId: a.channel.id, recipients: recipients([uniquePhone(), uniquePhone()]), scheduledAt: farFuture() });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      created.push(res.body.id);
    }
    const other = await api(h, b.org).post("/api/v1/templates/send").send({ templateId: b.template.id, messagingChannelId: b.channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture() });
    expect(other.status).to.equal(200);

    const seen: any[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await list(a.org, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.items.length).to.be.at.most(2);
      seen.push(...res.body.items);
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).to.equal(3);
    expect(seen.map((j) => j.id)).to.deep.equal([...created].reverse());
    expect(seen[0]).to.include({ status: "queued", templateId: a.template.id, messagingChannelId: a.channel.id, recipients: 2, sent: 0, failed: 0, skipped: 0 });

    const theirs = await list(b.org);
    expect(theirs.body.items.map((j: any) => j.id)).to.deep.equal([other.body.id]);
  });

  it("refuses another organization's cursor and a bad limit with 400", async () => {
    const a = await setup(h);
    const b = await setup(h);
    for (let i = 0; i < 2; i++) {
      await api(h, a.org).post("/api/v1/templates/send").send({ templateId: a.template.id, messagingChannelId: a.channel.id, recipients: recipients([uniquePhone()]), scheduledAt: farFuture() });
    }
    const first = await list(a.org, "?limit=1");
    expect(first.body.nextCursor).to.be.a("string");
    const stolen = await list(b.org, `?cursor=${encodeURIComponent(first.body.nextCursor)}`);
    expect(stolen.status).to.equal(400);
    expect(stolen.body.error.code).to.equal("INVALID_CURSOR");
    const bad = await list(a.org, "?limit=0");
    expect(bad.status).to.equal(400);
    expect(bad.body.error.code).to.equal("VALIDATION_ERROR");
    expect(bad.body.error.details[0].path).to.equal("query.limit");
  });

  it("answers an empty list for an organization without jobs", async () => {
    const { org } = await setup(h);
    const res = await list(org);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ items: [] });
  });
});
