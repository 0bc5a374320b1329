import { expect } from "chai";
import { providerBatchSubject, SUBJECTS } from "../src";

const INBOUND = SUBJECTS.providerInbound.subject;
const MESSAGES = SUBJECTS.providerMessages.subject;
const change = (value: unknown, field = "messages") => ({ field, value });
const batch = (...changes: unknown[]) => ({ object: "whatsapp_business_account", entry: [{ id: "waba", changes }] });
const message = { from: "15550001", id: "wamid.1", timestamp: "1", type: "text", text: { body: "statuses" } };
const status = { id: "wamid.2", status: "delivered", timestamp: "1", recipient_id: "15550001" };

describe("providerBatchSubject: where the gateway stores a verified provider batch", () => {
  it("puts inbound messages only on provider.messages.v1 (they may wait under load)", () => {
    expect(providerBatchSubject(batch(change({ messages: [message] })))).to.equal(MESSAGES);
    expect(providerBatchSubject({ entry: [{ changes: [change({ messages: [message] })] }, { changes: [change({ messages: [message, message] })] }] })).to.equal(MESSAGES);
  });

  it("keeps everything that may settle a send, or that template-jobs reads, on provider.inbound.v1", () => {
    expect(providerBatchSubject(batch(change({ statuses: [status] })))).to.equal(INBOUND);
    // Mixed: the status must not wait behind the message.
    expect(providerBatchSubject(batch(change({ messages: [message], statuses: [status] })))).to.equal(INBOUND);
    expect(providerBatchSubject(batch(change({ messages: [message] }), change({ statuses: [status] })))).to.equal(INBOUND);
    expect(providerBatchSubject(batch(change({ messages: [message] }), change({ event: "APPROVED" }, "message_template_status_update")))).to.equal(INBOUND);
    expect(providerBatchSubject(batch(change({ event: "APPROVED" }, "message_template_status_update")))).to.equal(INBOUND);
  });

  it("sends anything odd or empty to provider.inbound.v1, where every batch is handled", () => {
    for (const body of [null, 1, "x", {}, { entry: [] }, { entry: [{}] }, { entry: [{ changes: [] }] }, batch(change({ messages: [] })), batch(change(null)), batch(null)]) {
      expect(providerBatchSubject(body), JSON.stringify(body)).to.equal(INBOUND);
    }
  });
});
