/**
 * Minimal checks of an outbound message body, enough to answer malformed
 * requests with the provider's 400 code 100 the way the real network does.
 * Returns a human-readable problem, or null when the body is acceptable.
 */

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Characters are code points, as the API counts them: an emoji is one, not two UTF-16 units. */
const textOk = (value: unknown, max: number): value is string =>
  typeof value === "string" && value.length >= 1 && (value.length <= max || [...value].length <= max);

function validateComponent(component: unknown, i: number): string | null {
  const where = `template.components[${i}]`;
  if (!isRecord(component)) return `${where} must be an object`;
  if (component.type !== "header" && component.type !== "body" && component.type !== "button") {
    return `${where}.type must be header, body or button`;
  }
  if (component.type === "button") {
    if (component.sub_type !== "quick_reply" && component.sub_type !== "url") return `${where}.sub_type must be quick_reply or url`;
    if (typeof component.index !== "string" || !/^\d$/.test(component.index)) return `${where}.index must be a string 0 to 9`;
  }
  const params = component.parameters;
  if (!Array.isArray(params) || params.length === 0) return `${where}.parameters must be a non-empty array`;
  for (const [j, p] of params.entries()) {
    const at = `${where}.parameters[${j}]`;
    if (!isRecord(p) || typeof p.type !== "string") return `${at} must be an object with a type`;
    switch (p.type) {
      case "text":
        if (!textOk(p.text, 1024)) return `${at}.text must be 1 to 1024 characters`;
        break;
      case "payload":
        if (!textOk(p.payload, 1024)) return `${at}.payload must be 1 to 1024 characters`;
        break;
      case "image":
      case "video":
      case "document": {
        const media = p[p.type];
        if (!isRecord(media) || typeof media.link !== "string" || media.link.length === 0) return `${at}.${p.type}.link is required`;
        break;
      }
      default:
        break;
    }
  }
  return null;
}

export function validateMessageBody(body: unknown): string | null {
  if (!isRecord(body)) return "body must be a JSON object";
  if (body.messaging_product !== "whatsapp") return 'messaging_product must be "whatsapp"';
  if (typeof body.to !== "string" || !/^\+?\d{3,20}$/.test(body.to)) return "to must be a phone number (digits)";
  if (body.biz_opaque_callback_data !== undefined && !textOk(body.biz_opaque_callback_data, 512)) {
    return "biz_opaque_callback_data must be 1 to 512 characters";
  }
  switch (body.type) {
    case "text":
      if (!isRecord(body.text) || !textOk(body.text.body, 4096)) return "text.body must be 1 to 4096 characters";
      return null;
    case "template": {
      const t = body.template;
      if (!isRecord(t)) return "template is required";
      if (typeof t.name !== "string" || t.name.length === 0) return "template.name is required";
      if (!isRecord(t.language) || typeof t.language.code !== "string" || t.language.code.length === 0) {
        return "template.language.code is required";
      }
      if (t.components === undefined) return null;
      if (!Array.isArray(t.components) || t.components.length === 0) return "template.components must be a non-empty array";
      for (const [i, c] of t.components.entries()) {
        const problem = validateComponent(c, i);
        if (problem) return problem;
      }
      return null;
    }
    default:
      // Other kinds (image, interactive, ...) only need their object.
      if (typeof body.type !== "string" || !isRecord(body[body.type])) return "type must name a message kind present in the body";
      return null;
  }
}
