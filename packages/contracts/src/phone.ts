import { Metadata, parsePhoneNumberFromString, type CountryCode, type MetadataJson } from "libphonenumber-js/core";
import metadata from "libphonenumber-js/min/metadata";
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
  let known = recent.get(input);
  if (known !== undefined) return known;
  known = older.get(input);
  if (known === undefined) known = normalizeUncached(input);
  // Validation and the use case both normalize the same input; busy senders repeat their numbers. Two generations
  // of at most RECENT_MAX each: no per-entry eviction (deleting a Map's oldest entry one by one costs more than the
  // normalization it saves when 50,000 fresh numbers stream through).
  if (recent.size >= RECENT_MAX) {
    older = recent;
    recent = new Map();
  }
  recent.set(input, known);
  return known;
}

const RECENT_MAX = 10_000;
let recent = new Map<string, string | null>();
let older = new Map<string, string | null>();

/**
 * The library's own metadata (the same `min` set the package's default
 * export uses), and a copy in which every country calling code names only
 * its main country. Several countries sharing a calling code (the 25 NANPA
 * countries behind +1, +7, +44, ...) make the library find the exact
 * country by running phone-number-type regular expressions, most of the
 * cost of a parse. The E.164 result never depends on that country (the
 * national number is extracted with the calling code's main plan before),
 * and `isPossible()` depends on it only through the country's possible
 * lengths (possible iff the national number's length is one of them): so
 * where every country of the calling code agrees on the number's length,
 * the copy answers exactly what the full metadata would, without the
 * regular expressions; the disputed lengths (a 7-digit +1 number: possible
 * in Canada only) keep the full parse.
 */
const FULL = metadata as unknown as MetadataJson;
const MAIN_ONLY: MetadataJson = {
  ...FULL,
  country_calling_codes: Object.fromEntries(Object.entries(FULL.country_calling_codes).map(([cc, countries]) => [cc, countries.slice(0, 1)])),
};
/** Per calling code, the national number lengths its countries disagree on (possible in some, not in others). */
const DISPUTED_LENGTHS = new Map<string, Set<number>>();
{
  const m = new Metadata(FULL);
  for (const [cc, countries] of Object.entries(FULL.country_calling_codes)) {
    if (countries.length < 2) continue;
    const plans = countries.map((c) => {
      m.selectNumberingPlan(c as CountryCode);
      return m.numberingPlan?.possibleLengths() ?? [];
    });
    const disputed = new Set<number>();
    for (const lengths of plans) for (const n of lengths) if (!plans.every((l) => l.includes(n))) disputed.add(n);
    if (disputed.size) DISPUTED_LENGTHS.set(cc, disputed);
  }
}

function normalizeUncached(input: string): string | null {
  let s = input.trim().replace(/[\s\-.()]/g, "");
  if (s.startsWith("00")) s = "+" + s.slice(2);
  if (/^\d+$/.test(s)) s = "+" + s;
  if (!/^\+\d{2,17}$/.test(s)) return null;
  let parsed = parsePhoneNumberFromString(s, MAIN_ONLY);
  if (parsed && DISPUTED_LENGTHS.get(parsed.countryCallingCode)?.has(parsed.nationalNumber.length)) parsed = parsePhoneNumberFromString(s, FULL);
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
