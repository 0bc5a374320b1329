import { expect } from "chai";
import { MESSAGING_SUBJECTS } from "@platform/contracts";
import { eventually } from "@platform/testing";
import { analytics, counts, harness, newMessageId, newOrg, publish, statusEvent } from "./harness";

/** What messaging's outbox relay publishes when a message's first provider attempt leaves it pending. */
async function publishPending(organizationId: string, messageId: string, createdAt: string, msgId = `pending:${messageId}`): Promise<void> {
  await harness().bus.publish(MESSAGING_SUBJECTS.messagePending.subject, { organizationId, messageId, createdAt }, { msgId });
}

/** Waits until the pending feed has applied everything published on it before this call (it is applied in order). */
async function settlePending(): Promise<void> {
  const org = newOrg();
  await publishPending(org, newMessageId(), "2001-01-01T00:00:00.000Z");
  await eventually(async () => (await analytics(org, "2001-01-01", "2001-01-01")).outboundMessages.total === 1, 20_000);
}

describe("analytics: messages the provider has not accepted yet", () => {
  it("counts a pending message from its first attempt on (counts.pending, in total), then by its first status", async () => {
    const org = newOrg();
    const day = "2026-04-02";
    const [a, b] = [newMessageId(), newMessageId()];
    await publishPending(org, a, `${day}T10:00:00.000Z`);
    await publishPending(org, b, `${day}T11:00:00.000Z`);
    await eventually(async () => (await analytics(org, day, day)).outboundMessages.total === 2, 20_000);
    const pending = await analytics(org, day, day);
    expect(counts(pending)).to.deep.equal({ sent: 0, delivered: 0, read: 0, failed: 0, pending: 2 });
    expect(pending.outboundMessages.deliveryRate).to.equal(0);

    await publish([statusEvent(org, a, `${day}T10:00:00.000Z`, "sent"), statusEvent(org, b, `${day}T11:00:00.000Z`, "failed")]);
    await eventually(async () => counts(await analytics(org, day, day)).sent === 1, 20_000);
    await eventually(async () => counts(await analytics(org, day, day)).failed === 1, 20_000);
    const settled = await analytics(org, day, day);
    expect(settled.outboundMessages.total).to.equal(2);
    expect(counts(settled)).to.deep.equal({ sent: 1, delivered: 0, read: 0, failed: 1 });
    expect(settled.outboundMessages.failureRate).to.equal(0.5);
  });

  it("a pending fact after the message's status (another feed, no order between them), or twice, changes nothing", async () => {
    const org = newOrg();
    const day = "2026-04-03";
    const m = newMessageId();
    await publish([statusEvent(org, m, `${day}T09:00:00.000Z`, "read")]);
    await eventually(async () => counts(await analytics(org, day, day)).read === 1, 20_000);
    await publishPending(org, m, `${day}T09:00:00.000Z`);
    await publishPending(org, m, `${day}T09:00:00.000Z`, `pending:${m}:again`);
    await settlePending();
    const after = await analytics(org, day, day);
    expect(after.outboundMessages.total).to.equal(1);
    expect(counts(after)).to.deep.equal({ sent: 0, delivered: 0, read: 1, failed: 0 });
  });
});

/** What messaging's outbox relay publishes when a job's cancel ends a template send before it reached the provider. */
async function publishCancelled(organizationId: string, messageId: string, createdAt: string): Promise<void> {
  await harness().bus.publish(MESSAGING_SUBJECTS.messageCancelled.subject, { organizationId, messageId, createdAt }, { msgId: `cancelled:${messageId}` });
}

/** Waits until the cancelled feed has applied everything published on it before this call (it is applied in order). */
async function settleCancelled(): Promise<void> {
  const org = newOrg();
  await publishCancelled(org, newMessageId(), "2001-01-01T00:00:00.000Z");
  await eventually(async () => (await analytics(org, "2001-01-01", "2001-01-01")).outboundMessages.total === 1, 20_000);
}

describe("analytics: template sends a job's cancel ended before they were sent", () => {
  it("counts them as cancelled (in total, not failed), over their pending; a later pending fact changes nothing, a provider status does", async () => {
    const org = newOrg();
    const day = "2026-04-04";
    const [held, retried, sent] = [newMessageId(), newMessageId(), newMessageId()];
    await publishPending(org, retried, `${day}T10:00:00.000Z`);
    await publish([statusEvent(org, sent, `${day}T10:00:00.000Z`, "sent")]);
    await eventually(async () => (await analytics(org, day, day)).outboundMessages.total === 2, 20_000);
    await publishCancelled(org, held, `${day}T10:00:01.000Z`);
    await publishCancelled(org, retried, `${day}T10:00:00.000Z`);
    await eventually(async () => counts(await analytics(org, day, day)).cancelled === 2, 20_000);
    // A late pending fact of the same message changes nothing: cancelled is final.
    await publishPending(org, held, `${day}T10:00:01.000Z`);
    await settlePending();
    const after = await analytics(org, day, day);
    expect(after.outboundMessages.total).to.equal(3);
    expect(counts(after)).to.deep.equal({ sent: 1, delivered: 0, read: 0, failed: 0, cancelled: 2 });
    expect(after.outboundMessages.failureRate).to.equal(0);
    // The provider had accepted one after all (a call that went unanswered): its status moves it on, and a cancelled
    // fact coming after that status (another feed) changes nothing.
    await publish([statusEvent(org, retried, `${day}T10:00:00.000Z`, "delivered")]);
    await eventually(async () => counts(await analytics(org, day, day)).delivered === 1, 20_000);
    await publishCancelled(org, sent, `${day}T10:00:00.000Z`);
    await settleCancelled();
    const moved = await analytics(org, day, day);
    expect(moved.outboundMessages.total).to.equal(3);
    expect(counts(moved)).to.deep.equal({ sent: 1, delivered: 1, read: 0, failed: 0, cancelled: 1 });
  });
});
