/**
 * Pure builders of the provider's outbound JSON bodies (contract section 4).
 *
 * They are separate from the HTTP client so every rule of the protocol can be
 * unit tested without a server, and so the key order of the bodies we send is
 * fixed in one place (it makes recorded requests and logs easy to diff).
 */

/** Media kinds a template header can carry. */
export type HeaderFormat = "image" | "video" | "document";

export interface TextMessageInput {
  /** E.164 with `+`, or digits only. */
  to: string;
  text: string;
  /** Our message id; the provider echoes it in that message's status callbacks. */
  callbackData?: string;
}

export interface TemplateRef {
  name: string;
  /** Provider language code, e.g. `en_US`. */
  language: string;
  /** Media kind of the template's header, when it has a media header. */
  headerFormat?: HeaderFormat | null;
}

export interface HeaderMedia {
  url: string;
  /** Shown to the recipient; only sent for `document` headers. */
  fileName?: string;
}

export type ButtonParameter =
  | { type: "quick_reply"; payload: string; index?: number }
  | { type: "url"; text: string; index?: number };

export interface TemplateMessageInput {
  to: string;
  template: TemplateRef;
  headerMedia?: HeaderMedia | null;
  bodyParameters?: string[];
  buttonParameters?: ButtonParameter[];
  callbackData?: string;
}

export interface MediaLink {
  link: string;
  filename?: string;
}

export type HeaderParameter =
  | { type: "image"; image: MediaLink }
  | { type: "video"; video: MediaLink }
  | { type: "document"; document: MediaLink };

export type TemplateComponent =
  | { type: "header"; parameters: HeaderParameter[] }
  | { type: "body"; parameters: Array<{ type: "text"; text: string }> }
  | {
      type: "button";
      sub_type: "quick_reply";
      index: string;
      parameters: Array<{ type: "payload"; payload: string }>;
    }
  | { type: "button"; sub_type: "url"; index: string; parameters: Array<{ type: "text"; text: string }> };

interface BodyBase {
  messaging_product: "whatsapp";
  recipient_type: "individual";
  to: string;
}

export interface TextMessageBody extends BodyBase {
  type: "text";
  text: { body: string };
  biz_opaque_callback_data?: string;
}

export interface TemplateMessageBody extends BodyBase {
  type: "template";
  template: {
    name: string;
    language: { policy: "deterministic"; code: string };
    components?: TemplateComponent[];
  };
  biz_opaque_callback_data?: string;
}

export type MessageBody = TextMessageBody | TemplateMessageBody;

/**
 * The provider wants E.164 digits without `+`. We also drop the separators a
 * human might have typed; validation of the number itself happens upstream of
 * this adapter (contracts' `normalizePhone`).
 */
export function toProviderDigits(phone: string): string {
  return phone.replace(/[^\d]/g, "");
}

export function buildTextBody(input: TextMessageInput): TextMessageBody {
  const body: TextMessageBody = {
    messaging_product: "whatsapp",
    recipient_type: "individual",
    to: toProviderDigits(input.to),
    type: "text",
    text: { body: input.text },
  };
  if (input.callbackData !== undefined) body.biz_opaque_callback_data = input.callbackData;
  return body;
}

/**
 * The header parameter's type is the template's header format; a template
 * without a declared format gets `document` when a file name is given (only
 * documents have names), else `image`, the most common media header.
 */
function headerParameter(template: TemplateRef, media: HeaderMedia): HeaderParameter {
  const format: HeaderFormat = template.headerFormat ?? (media.fileName !== undefined ? "document" : "image");
  switch (format) {
    case "document": {
      const link: MediaLink = { link: media.url };
      if (media.fileName !== undefined) link.filename = media.fileName;
      return { type: "document", document: link };
    }
    case "video":
      return { type: "video", video: { link: media.url } };
    case "image":
      return { type: "image", image: { link: media.url } };
  }
}

function buttonComponent(button: ButtonParameter, position: number): TemplateComponent {
  // The index is the button's position in the template, which the caller may
  // give explicitly (e.g. only the second button has a parameter); otherwise
  // it is the parameter's position in the array. The provider wants a string.
  const index = String(button.index ?? position);
  if (button.type === "quick_reply") {
    return {
      type: "button",
      sub_type: "quick_reply",
      index,
      parameters: [{ type: "payload", payload: button.payload }],
    };
  }
  return { type: "button", sub_type: "url", index, parameters: [{ type: "text", text: button.text }] };
}

export function buildTemplateBody(input: TemplateMessageInput): TemplateMessageBody {
  // Components in the provider's order (header, body, buttons), each only when
  // it has parameters: the provider rejects empty components.
  const components: TemplateComponent[] = [];
  if (input.headerMedia) {
    components.push({ type: "header", parameters: [headerParameter(input.template, input.headerMedia)] });
  }
  if (input.bodyParameters && input.bodyParameters.length > 0) {
    components.push({ type: "body", parameters: input.bodyParameters.map((text) => ({ type: "text", text })) });
  }
  (input.buttonParameters ?? []).forEach((button, position) => components.push(buttonComponent(button, position)));

  const template: TemplateMessageBody["template"] = {
    name: input.template.name,
    language: { policy: "deterministic", code: input.template.language },
  };
  if (components.length > 0) template.components = components;

  const body: TemplateMessageBody = {
    messaging_product: "whatsapp",
    recipient_type: "individual",
    to: toProviderDigits(input.to),
    type: "template",
    template,
  };
  if (input.callbackData !== undefined) body.biz_opaque_callback_data = input.callbackData;
  return body;
}
