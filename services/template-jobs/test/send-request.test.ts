import { expect } from "chai";
import { TemplateSendJobRequest } from "@platform/contracts";
import { readSendRequest } from "../src/use-cases/send-request";

/**
 * The hand-written reading of POST /api/v1/templates/send must answer what
 * the contract's schema answers: the same output for every body the schema
 * accepts, and no answer (so the schema reads it, errors and all) for every
 * body the schema refuses.
 */
describe("readSendRequest: the send body read without zod per recipient", () => {
  const head = { templateId: "tpl_01jd0000000000000000000000", messagingChannelId: "ch_1" };

  const valid: Array<Record<string, unknown>> = [
    { ...head, recipients: [{ phone: "+14155550100" }] },
    { ...head, recipients: [{ phone: " +1 (415) 555-0101 ", bodyParameters: ["a", "b"], contactId: "ct_1" }, { phone: "0044 20 7946 0958", bodyParameters: [] }] },
    { ...head, recipients: [{ phone: "5511987654321", buttonParameters: [{ type: "url", text: "abc", index: 1 }, { type: "quick_reply", payload: "p" }] }] },
    { ...head, templateId: "424242", templateAccountId: "waba_1", recipients: [{ phone: "+14155550102", bodyParameters: ["x".repeat(1024)], extra: true }], unknown: 1 },
    { ...head, recipients: [{ phone: "+14155550103" }], scheduledAt: "2026-11-25T10:00:00+01:00", throttlePerHour: 100_000, headerMedia: { url: "https://x/y.pdf", fileName: "y.pdf" } },
    // service-spec.md: a date input is date-only or full ISO 8601 (here without an offset: UTC).
    { ...head, recipients: [{ phone: "+14155550104" }], scheduledAt: "2030-01-01" },
    { ...head, recipients: [{ phone: "+14155550105" }], scheduledAt: "2030-01-01T10:00:00" },
    { ...head, recipients: Array.from({ length: 50_000 }, (_, i) => ({ phone: `+1415${2_000_000 + i}`, bodyParameters: [`c ${i}`] })) },
  ];
  valid.forEach((body, i) => {
    it(`gives the schema's own output for valid body ${i}`, () => {
      const expected = TemplateSendJobRequest.parse(body);
      expect(readSendRequest(body)).to.deep.equal(expected);
    });
  });

  const r = (recipient: Record<string, unknown>) => ({ ...head, recipients: [{ phone: "+14155550100" }, recipient] });
  const invalid: Array<[string, Record<string, unknown>]> = [
    ["no recipients", { ...head, recipients: [] }],
    ["recipients not an array", { ...head, recipients: { 0: { phone: "+14155550100" } } }],
    ["50,001 recipients", { ...head, recipients: Array.from({ length: 50_001 }, () => ({ phone: "+14155550100" })) }],
    ["a recipient not an object", { ...head, recipients: ["+14155550100"] }],
    ["a null recipient", { ...head, recipients: [null] }],
    ["no phone", r({ bodyParameters: ["a"] })],
    ["phone a number", r({ phone: 14155550100 })],
    ["phone too short", r({ phone: "12" })],
    ["phone too long", r({ phone: "+1".padEnd(33, "0") })],
    ["phone not a number", r({ phone: "+1 555 CALL NOW" })],
    ["contactId empty", r({ phone: "+14155550101", contactId: "" })],
    ["contactId null", r({ phone: "+14155550101", contactId: null })],
    ["contactId too long", r({ phone: "+14155550101", contactId: "c".repeat(65) })],
    ["bodyParameters not an array", r({ phone: "+14155550101", bodyParameters: "a" })],
    ["21 bodyParameters", r({ phone: "+14155550101", bodyParameters: Array(21).fill("x") })],
    ["an empty bodyParameter", r({ phone: "+14155550101", bodyParameters: ["a", ""] })],
    ["a bodyParameter over 1,024", r({ phone: "+14155550101", bodyParameters: ["x".repeat(1025)] })],
    ["a bodyParameter a number", r({ phone: "+14155550101", bodyParameters: [1] })],
    ["a button of no known type", r({ phone: "+14155550101", buttonParameters: [{ type: "call" }] })],
    ["11 buttons", r({ phone: "+14155550101", buttonParameters: Array(11).fill({ type: "quick_reply", payload: "p" }) })],
    ["throttlePerHour 0", { ...head, recipients: [{ phone: "+14155550100" }], throttlePerHour: 0 }],
    ["headerMedia.url not a URL", { ...head, recipients: [{ phone: "+14155550100" }], headerMedia: { url: "not a url" } }],
    ["headerMedia.url not http(s)", { ...head, recipients: [{ phone: "+14155550100" }], headerMedia: { url: "ftp://files.example.com/a.pdf" } }],
    ["headerMedia.url over 4000", { ...head, recipients: [{ phone: "+14155550100" }], headerMedia: { url: `https://cdn.example.com/${"a".repeat(4000)}` } }],
    ["scheduledAt not a date", { ...head, recipients: [{ phone: "+14155550100" }], scheduledAt: "tomorrow" }],
    ["scheduledAt a day that does not exist", { ...head, recipients: [{ phone: "+14155550100" }], scheduledAt: "2030-02-30" }],
    ["no templateId", { messagingChannelId: "ch_1", recipients: [{ phone: "+14155550100" }] }],
  ];
  for (const [name, body] of invalid) {
    it(`leaves ${name} to the schema (which refuses it)`, () => {
      expect(TemplateSendJobRequest.safeParse(body).success).to.equal(false);
      expect(readSendRequest(body)).to.equal(undefined);
    });
  }
});
