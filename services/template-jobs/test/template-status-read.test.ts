import { expect } from "chai";
import { templateStatusChanges } from "../src/use-cases/template-status";

describe("template status changes read from a provider batch (unit)", () => {
  const change = (event: string, id: unknown = 4242) => ({ field: "message_template_status_update", value: { event, message_template_id: id, message_template_name: "promo", message_template_language: "en", reason: "NONE" } });

  it("reads each entry and change on its own: unreadable ones are skipped, the others kept; a numeric account id is read as its digits", () => {
    const body = JSON.stringify({
      object: "whatsapp_business_account",
      entry: [
        null,
        { id: 12345, changes: [change("APPROVED")] },
        { id: "waba_a", changes: "not a list" },
        { id: "waba_b", changes: [null, { field: 7 }, change("PAUSED", 77), { field: "messages", value: {} }] },
        { id: { nested: true }, changes: [change("DISABLED")] },
      ],
    });
    expect(templateStatusChanges(body)).to.deep.equal([
      { templateAccountId: "12345", providerTemplateId: "4242", status: "approved", reason: null },
      { templateAccountId: "waba_b", providerTemplateId: "77", status: "paused", reason: null },
    ]);
  });

  it("reads a NUL in a reason or an id as U+FFFD (Postgres stores none: the batch would be redelivered until dead-lettered)", () => {
    const body = JSON.stringify({ entry: [{ id: "waba\0x", changes: [{ ...change("REJECTED", "42\0"), value: { ...change("REJECTED").value, message_template_id: "42\0", reason: "bad\0word" } }] }] });
    expect(body).to.include("\\u0000");
    expect(templateStatusChanges(body)).to.deep.equal([{ templateAccountId: "waba\uFFFDx", providerTemplateId: "42\uFFFD", status: "rejected", reason: "bad\uFFFDword" }]);
  });

  it("refuses (dead letter) only a body that is not JSON or has no entry list", () => {
    expect(() => templateStatusChanges("{")).to.throw(/unreadable provider batch/);
    expect(() => templateStatusChanges(JSON.stringify({ entry: 3 }))).to.throw(/unreadable provider batch/);
  });
});
