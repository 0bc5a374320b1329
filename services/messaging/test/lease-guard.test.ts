import { expect } from "chai";
import { eventually } from "@platform/testing";
import { newId } from "@platform/id";
import type { MessagingDeps } from "../src/context";
import type { MessageRow } from "../src/db/repositories/messages.repository";
import { channelsRepository } from "../src/db/repositories/channels.repository";
import { contextOf } from "../src/service";
import { attemptSend } from "../src/use-cases/deliver";
import { createChannel, newOrg, providerRequestsFor, sharedHarness, type Harness } from "./helpers/harness";

/**
 * An attempt calls the provider only while its lease covers the call: past that, the stalled-send sweep may
 * already have handed the message to the worker, and both would send it (seen under heavy load with two
 * template-jobs replicas). The decision is asserted, not timed: a lease that ends now is never used for a call.
 */
describe("messaging: an attempt whose lease cannot cover the provider call leaves the message to the worker", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  it("calls the provider with a lease to spare, and not with one that runs out before the call could end", async () => {
    const org = newOrg();
    const created = await createChannel(h, org);
    const deps = (h.svc as unknown as { deps: MessagingDeps }).deps;
    const ctx = contextOf(deps);
    const channel = (await channelsRepository.findById(ctx.db, org, created.id))!;
    const row = (leaseEndsInMs: number): MessageRow =>
      ({
        id: newId("message"),
        organization_id: org,
        channel_id: channel.id,
        conversation_id: "conv_x",
        contact_id: "ct_x",
        phone: "+14155550123",
        direction: "outbound",
        type: "text",
        text: "lease",
        status: "pending",
        attempts: 1,
        created_at: new Date(),
        lease_until: new Date(Date.now() + leaseEndsInMs),
      }) as unknown as MessageRow;

    const late = row(deps.env.PROVIDER_TIMEOUT_MS); // covers the timeout, not the margin
    await attemptSend(ctx, late, { enqueueRetry: false, channel, paceWaitMs: 0 });
    const spare = row(deps.env.PROVIDER_TIMEOUT_MS + 60_000);
    await attemptSend(ctx, spare, { enqueueRetry: false, channel, paceWaitMs: 0 });
    // The second reached the provider (the call happens at all); the first never did.
    await eventually(() => providerRequestsFor(h, spare.id).length === 1, 10_000);
    expect(providerRequestsFor(h, late.id)).to.have.length(0);
  });
});
