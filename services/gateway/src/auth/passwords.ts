import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";

/** OWASP's scrypt floor is N=2^17, r=8, p=1 (~128 MiB, ~0.1-0.3 s per hash on one core): the default cost (log2 N) of 17. */
export const DEFAULT_SCRYPT_COST = 17;
const KEY_LENGTH = 32;

function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key))));
}
const options = (p: { N: number; r: number; p: number }): ScryptOptions => ({ ...p, maxmem: 256 * p.N * p.r });

/** `scrypt$N$r$p$salt$hash`, salt and hash base64url: the parameters travel with the hash, so they can be raised later. */
export async function hashPassword(password: string, cost = DEFAULT_SCRYPT_COST): Promise<string> {
  const PARAMS = { N: 2 ** cost, r: 8, p: 1 };
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize("NFC"), salt, KEY_LENGTH, options(PARAMS));
  return ["scrypt", PARAMS.N, PARAMS.r, PARAMS.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const params = { N: Number(n), r: Number(r), p: Number(p) };
  const given = await scrypt(password.normalize("NFC"), Buffer.from(salt, "base64url"), expected.length, options(params));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Verified against when the email is unknown, so an unknown email costs the same time as a wrong password. */
const decoys = new Map<number, Promise<string>>();
export function decoyHash(cost = DEFAULT_SCRYPT_COST): Promise<string> {
  if (!decoys.has(cost)) decoys.set(cost, hashPassword(randomBytes(16).toString("hex"), cost));
  return decoys.get(cost)!;
}
