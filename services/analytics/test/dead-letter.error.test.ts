import { expect } from "chai";
import { collectSubject, eventually } from "@platform/testing";
import { analytics, counts, harness, newMessageId, newOrg, publish, settle, statusEvent } from "./harness";

describe("analytics: events it cannot use", () => {
  it("dead-letters a status event without createdAt and still applies the rest of its batch", async () => {
    const h = harness();
    const dlq = await collectSubject(h.env.natsUrl, `${h.env.namespace}.dlq.>`);
    try {
      const org = newOrg();
      const good = statusEvent(org, newMessageId(), "2026-08-08T08:08:08.008Z", "delivered");
      const bad = statusEvent(org, newMessageId(), "2026-08-08T08:08:08.008Z", "sent");
      const badData = (bad.payload as { data: Record<string, unknown> }).data;
      delete badData.createdAt;
      await publish([bad, good]);
      await settle();
      expect(counts(await analytics(org, "2026-08-08", "2026-08-08"))).to.deep.equal({ sent: 0, delivered: 1, read: 0, failed: 0 });
      const dead = await eventually(() => dlq.received.find((m) => m.data?.data?.id === badData.id), 10_000);
      expect(dead.subject).to.equal(`${h.env.namespace}.dlq.analytics-message-events`);
      expect(dead.headers["X-Dead-Letter-Reason"]).to.match(/createdAt/);
    } finally {
      await dlq.close();
    }
  });
});
