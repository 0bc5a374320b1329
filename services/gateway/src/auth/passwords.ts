import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";

/**
 * OWASP's equivalent scrypt floors: N=2^17 r=8 p=1 (128 MiB), 2^16/p=2, 2^15/p=3 (32 MiB), 2^14/p=5, 2^13/p=10.
 * The default, 2^15 with p=3, is as costly to attack with a quarter of the memory per hash at the public edge.
 * Costs below 13 (tests only) use p=1.
 */
export const DEFAULT_SCRYPT_COST = 15;
const OWASP_P: Record<number, number> = { 17: 1, 16: 2, 15: 3, 14: 5, 13: 10 };
const parallelismFor = (cost: number) => (cost >= 17 ? 1 : (OWASP_P[cost] ?? 1));

/** Hashes run on libuv's small thread pool (shared with DNS and fs): at most two at a time per process. */
const MAX_CONCURRENT = 2;
let running = 0;
const waiting: Array<() => void> = [];
async function limited<T>(work: () => Promise<T>): Promise<T> {
  // A finished hash hands its slot straight to the next waiter, so no newcomer can slip past the limit.
  if (running >= MAX_CONCURRENT) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}
const KEY_LENGTH = 32;

function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return limited(() => new Promise((resolve, reject) => scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key)))));
}
const options = (p: { N: number; r: number; p: number }): ScryptOptions => ({ ...p, maxmem: 256 * p.N * p.r });
const MAX_STORED_COST = 20;

/** `scrypt$N$r$p$salt$hash`, salt and hash base64url: the parameters travel with the hash, so they can be raised later. */
export async function hashPassword(password: string, cost = DEFAULT_SCRYPT_COST): Promise<string> {
  const PARAMS = { N: 2 ** cost, r: 8, p: parallelismFor(cost) };
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize("NFC"), salt, KEY_LENGTH, options(PARAMS));
  return ["scrypt", PARAMS.N, PARAMS.r, PARAMS.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const params = { N: Number(n), r: Number(r), p: Number(p) };
  // Only our own hashes are stored, but a corrupt row must not make one sign-in allocate gigabytes.
  if (!(params.N >= 2 && params.N <= 2 ** MAX_STORED_COST && params.r >= 1 && params.r <= 32 && params.p >= 1 && params.p <= 16)) return false;
  const given = await scrypt(password.normalize("NFC"), Buffer.from(salt, "base64url"), expected.length, options(params));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Verified against when the email is unknown, so an unknown email costs the same time as a wrong password. */
const decoys = new Map<number, Promise<string>>();
export function decoyHash(cost = DEFAULT_SCRYPT_COST): Promise<string> {
  if (!decoys.has(cost)) decoys.set(cost, hashPassword(randomBytes(16).toString("hex"), cost));
  return decoys.get(cost)!;
}
