import { randomFillSync } from "node:crypto";
import { monotonicFactory } from "ulid";

/**
 * ulid's default PRNG calls the OS CSPRNG once per character; drawing from a
 * pooled buffer of CSPRNG bytes keeps ids unpredictable at a fraction of the cost.
 */
const pool = new Uint8Array(4096);
let offset = pool.length;
function prng(): number {
  if (offset >= pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  return pool[offset++] / 0x100;
}

const ulid = monotonicFactory(prng);

/** Prefixes of every id the platform issues; one place, so ids read like their type. */
export const ID_PREFIXES = {
  organization: "org",
  apiKey: "key",
  channel: "ch",
  contact: "ct",
  conversation: "conv",
  message: "msg",
  optOut: "opt",
  event: "evt",
  template: "tpl",
  job: "job",
  recipient: "rcp",
  webhook: "wh",
  delivery: "dlv",
  request: "req",
  user: "usr",
  invitation: "inv",
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

/**
 * A prefixed, time-sortable id: `msg_01JD…` (ULID, monotonic within a process).
 * Sorting ids sorts by creation time, which keyset pagination relies on.
 */
export function newId(kind: IdKind): string {
  return `${ID_PREFIXES[kind]}_${ulid().toLowerCase()}`;
}

/** True when `value` looks like an id of `kind` (cheap shape check, not existence). */
export function isId(kind: IdKind, value: unknown): value is string {
  return typeof value === "string" && new RegExp(`^${ID_PREFIXES[kind]}_[0-9a-hjkmnp-tv-z]{26}$`).test(value);
}
