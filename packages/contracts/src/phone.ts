import { parsePhoneNumberFromString } from "libphonenumber-js";
import { z } from "zod";

/**
 * Normalizes a phone number to E.164, or returns null.
 *
 * Accepted: spaces, dashes, dots, parentheses and a leading `00` for `+`;
 * digits only means the country code is included (the network's `wa_id`
 * form). A number passes when the library reads it as *possible* (length
 * rules), not only when its metadata knows the range: new ranges open faster
 * than metadata ships.
 */
export function normalizePhone(input: string): string | null {
  const known = recent.get(input);
  if (known !== undefined) return known;
  const result = normalizeUncached(input);
  // Validation and the use case both normalize the same input; busy senders repeat their numbers.
  if (recent.size >= RECENT_MAX) recent.delete(recent.keys().next().value!);
  recent.set(input, result);
  return result;
}

const RECENT_MAX = 10_000;
const recent = new Map<string, string | null>();

function normalizeUncached(input: string): string | null {
  let s = input.trim().replace(/[\s\-.()]/g, "");
  if (s.startsWith("00")) s = "+" + s.slice(2);
  if (/^\d+$/.test(s)) s = "+" + s;
  if (!/^\+\d{2,17}$/.test(s)) return null;
  const parsed = parsePhoneNumberFromString(s);
  if (!parsed || !parsed.isPossible()) return null;
  return parsed.number;
}

/** A phone field of the API: 3 to 32 characters and normalizable to E.164. */
export const PhoneInput = z
  .string()
  .min(3)
  .max(32)
  .refine((s) => normalizePhone(s) !== null, "is not a valid phone number (use E.164, e.g. +15550001111)")
  .meta({ description: "E.164 (`+` and digits) or digits only with the country code; normalized on the server", example: "+15550001111" });

/** E.164 digits without `+`, as the provider wants them in `to`. */
export const toProviderDigits = (e164: string) => e164.replace(/^\+/, "");
