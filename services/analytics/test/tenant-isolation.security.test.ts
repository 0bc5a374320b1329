import { expect } from "chai";
import request from "supertest";
import { eventually } from "@platform/testing";
import { analytics, counts, harness, newMessageId, newOrg, publish, settle, statusEvent } from "./harness";

describe("analytics: tenant isolation", () => {
  it("an organization sees only its own messages, even for the same message id in another organization", async () => {
    const a = newOrg();
    const b = newOrg();
    const C = "2026-07-07T07:07:07.007Z";
    const shared = newMessageId();
    await publish([
      statusEvent(a, shared, C, "sent"),
      statusEvent(a, newMessageId(), C, "read"),
      statusEvent(b, shared, C, "failed"),
    ]);
    await eventually(async () => (await analytics(b, "2026-07-07", "2026-07-07")).outboundMessages.total === 1, 20_000);
    await settle();
    expect(counts(await analytics(a, "2026-07-07", "2026-07-07"))).to.deep.equal({ sent: 1, delivered: 0, read: 1, failed: 0 });
    expect(counts(await analytics(b, "2026-07-07", "2026-07-07"))).to.deep.equal({ sent: 0, delivered: 0, read: 0, failed: 1 });
    expect((await analytics(newOrg(), "2026-07-07", "2026-07-07")).outboundMessages.total).to.equal(0);
  });

  it("refuses calls without the gateway's internal token", async () => {
    const res = await request(harness().svc.url).get("/api/v1/analytics?startDate=2026-01-01&endDate=2026-01-02").set("x-organization-id", newOrg());
    expect(res.status).to.equal(401);
  });
});
