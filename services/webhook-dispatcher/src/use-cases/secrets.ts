import { randomBytes } from "node:crypto";

/** `whsec_` + base64 of 32 random bytes (contract section 2). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}
