import { expect } from "chai";
import { CallbackWatermark } from "../src/bus/callback-watermark";

/** A consumer whose state the test sets: what `jsm.consumers.info` answers. */
function consumer() {
  const state = { num_pending: 0, num_ack_pending: 0, delivered: { stream_seq: 0 }, ack_floor: { stream_seq: 0 } };
  const bus = { streamName: () => "PROVIDER_INBOUND", jsm: { consumers: { info: async () => state } } };
  return { state, watermark: new CallbackWatermark(bus as never) };
}

/**
 * A send that may have been accepted waits until the status callbacks stored by its due time are applied: after an
 * outage they wait in JetStream, and a retry sent before them sent the message twice.
 */
describe("unit: CallbackWatermark (how far the provider's status callbacks have been applied)", () => {
  it("is through the time of a read that found nothing pending and nothing unacknowledged", async () => {
    const { watermark } = consumer();
    const before = Date.now();
    expect(watermark.appliedThrough(before)).to.equal(false);
    await watermark.read();
    expect(watermark.appliedThrough(before)).to.equal(true);
    expect(watermark.appliedThrough(Date.now() + 1_000)).to.equal(false);
  });

  it("with a backlog, stays behind; with all delivered, moves once the ack floor passes what was delivered", async () => {
    const { state, watermark } = consumer();
    const before = Date.now();
    Object.assign(state, { num_pending: 500, num_ack_pending: 40, delivered: { stream_seq: 100 }, ack_floor: { stream_seq: 60 } });
    await watermark.read();
    expect(watermark.appliedThrough(before)).to.equal(false);
    // Everything delivered (nothing pending), 10 still being applied.
    Object.assign(state, { num_pending: 0, num_ack_pending: 10, delivered: { stream_seq: 640 }, ack_floor: { stream_seq: 630 } });
    await watermark.read();
    expect(watermark.appliedThrough(before)).to.equal(false);
    // New callbacks keep coming (never idle), but the ones delivered by the last read are applied.
    Object.assign(state, { num_pending: 3, num_ack_pending: 12, delivered: { stream_seq: 660 }, ack_floor: { stream_seq: 645 } });
    await watermark.read();
    expect(watermark.appliedThrough(before)).to.equal(true);
  });

  it("stays where it was while the consumer cannot be read", async () => {
    const bus = { streamName: () => "PROVIDER_INBOUND", jsm: { consumers: { info: async () => Promise.reject(new Error("timeout")) } } };
    const watermark = new CallbackWatermark(bus as never);
    const before = Date.now();
    await watermark.read();
    // Unknown for under a minute: a send that may have been accepted keeps waiting.
    expect(watermark.appliedThrough(before)).to.equal(false);
  });
});
