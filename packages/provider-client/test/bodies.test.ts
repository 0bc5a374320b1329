import { expect } from "chai";
import { buildTemplateBody, buildTextBody } from "../src";

describe("buildTextBody", () => {
  it("builds the text body with digits-only recipient and callback data, keys in protocol order", () => {
    const body = buildTextBody({ to: "+15550001111", text: "hello", callbackData: "msg_1" });
    expect(body).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "15550001111",
      type: "text",
      text: { body: "hello" },
      biz_opaque_callback_data: "msg_1",
    });
    expect(JSON.stringify(body)).to.equal(
      '{"messaging_product":"whatsapp","recipient_type":"individual","to":"15550001111","type":"text","text":{"body":"hello"},"biz_opaque_callback_data":"msg_1"}',
    );
  });

  it("accepts a digits-only recipient as is", () => {
    expect(buildTextBody({ to: "15550001111", text: "x", callbackData: "m" }).to).to.equal("15550001111");
  });

  it("omits biz_opaque_callback_data when no callback data is given", () => {
    expect(buildTextBody({ to: "+1555", text: "x" })).to.not.have.property("biz_opaque_callback_data");
  });
});

describe("buildTemplateBody", () => {
  const base = { to: "+15550001111", callbackData: "msg_2" };

  it("sends no components at all when nothing has parameters", () => {
    const body = buildTemplateBody({ ...base, template: { name: "promo", language: "en_US" }, bodyParameters: [], buttonParameters: [] });
    expect(body).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "15550001111",
      type: "template",
      template: { name: "promo", language: { policy: "deterministic", code: "en_US" } },
      biz_opaque_callback_data: "msg_2",
    });
  });

  it("puts components in the order header, body, buttons", () => {
    const body = buildTemplateBody({
      ...base,
      template: { name: "promo", language: "pt_BR", headerFormat: "image" },
      headerMedia: { url: "https://cdn/x.png" },
      bodyParameters: ["Ana", "42"],
      buttonParameters: [
        { type: "quick_reply", payload: "STOP" },
        { type: "url", text: "abc" },
      ],
    });
    expect(body.template.components).to.deep.equal([
      { type: "header", parameters: [{ type: "image", image: { link: "https://cdn/x.png" } }] },
      { type: "body", parameters: [{ type: "text", text: "Ana" }, { type: "text", text: "42" }] },
      { type: "button", sub_type: "quick_reply", index: "0", parameters: [{ type: "payload", payload: "STOP" }] },
      { type: "button", sub_type: "url", index: "1", parameters: [{ type: "text", text: "abc" }] },
    ]);
    expect(body.template.language).to.deep.equal({ policy: "deterministic", code: "pt_BR" });
  });

  it("sends only the body component when only body parameters exist", () => {
    const body = buildTemplateBody({ ...base, template: { name: "t", language: "en" }, bodyParameters: ["a"] });
    expect(body.template.components).to.deep.equal([{ type: "body", parameters: [{ type: "text", text: "a" }] }]);
  });

  it("uses an explicit button index, as a string, over the array position", () => {
    const body = buildTemplateBody({
      ...base,
      template: { name: "t", language: "en" },
      buttonParameters: [{ type: "url", text: "x", index: 2 }, { type: "quick_reply", payload: "p" }],
    });
    expect(body.template.components).to.deep.equal([
      { type: "button", sub_type: "url", index: "2", parameters: [{ type: "text", text: "x" }] },
      { type: "button", sub_type: "quick_reply", index: "1", parameters: [{ type: "payload", payload: "p" }] },
    ]);
  });

  it("keeps index 0 when given explicitly", () => {
    const body = buildTemplateBody({
      ...base,
      template: { name: "t", language: "en" },
      buttonParameters: [{ type: "url", text: "x" }, { type: "quick_reply", payload: "p", index: 0 }],
    });
    expect(body.template.components?.map((c) => ("index" in c ? c.index : null))).to.deep.equal(["0", "0"]);
  });

  describe("header type", () => {
    const header = (headerFormat: "image" | "video" | "document" | null | undefined, fileName?: string) =>
      buildTemplateBody({
        ...base,
        template: { name: "t", language: "en", headerFormat },
        headerMedia: fileName === undefined ? { url: "https://cdn/f" } : { url: "https://cdn/f", fileName },
      }).template.components?.[0];

    it("follows the template's header format and sends filename only for documents", () => {
      expect(header("document", "a.pdf")).to.deep.equal({
        type: "header",
        parameters: [{ type: "document", document: { link: "https://cdn/f", filename: "a.pdf" } }],
      });
      expect(header("video", "a.mp4")).to.deep.equal({ type: "header", parameters: [{ type: "video", video: { link: "https://cdn/f" } }] });
      expect(header("image", "a.png")).to.deep.equal({ type: "header", parameters: [{ type: "image", image: { link: "https://cdn/f" } }] });
    });

    it("sends a document header without filename when none is given", () => {
      expect(header("document")).to.deep.equal({ type: "header", parameters: [{ type: "document", document: { link: "https://cdn/f" } }] });
    });

    it("without a header format: document when a file name is given, else image", () => {
      expect(header(null, "a.pdf")).to.deep.equal({
        type: "header",
        parameters: [{ type: "document", document: { link: "https://cdn/f", filename: "a.pdf" } }],
      });
      expect(header(undefined)).to.deep.equal({ type: "header", parameters: [{ type: "image", image: { link: "https://cdn/f" } }] });
      expect(header(null)).to.deep.equal({ type: "header", parameters: [{ type: "image", image: { link: "https://cdn/f" } }] });
    });

    it("sends no header component without header media, whatever the format", () => {
      const body = buildTemplateBody({ ...base, template: { name: "t", language: "en", headerFormat: "image" }, headerMedia: null });
      expect(body.template).to.not.have.property("components");
    });
  });
});
