import { createHash, randomInt, timingSafeEqual } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const KEY_PREFIX = "svc_";
const KEY_BODY_LENGTH = 40;
const KEY_SHAPE = /^svc_[0-9A-Za-z]{32,128}$/;

/** `svc_` + 40 random base62 characters (~238 bits), from the OS CSPRNG without modulo bias. */
export function generateApiKey(): string {
  let body = "";
  for (let i = 0; i < KEY_BODY_LENGTH; i++) body += BASE62[randomInt(62)];
  return KEY_PREFIX + body;
}

/**
 * SHA-256, not bcrypt: the key carries ~238 random bits, so a slow hash adds
 * no protection against guessing and would cap the gateway at a few dozen
 * verifications per second.
 */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The key of an `Authorization: Bearer svc_…` header, or null when absent or malformed. */
export function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!match) return null;
  return KEY_SHAPE.test(match[1]) ? match[1] : null;
}

export const keyPrefixOf = (key: string) => key.slice(0, 8);
