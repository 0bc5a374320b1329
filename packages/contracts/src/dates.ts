/**
 * Dates accepted as input (service-spec.md, "Where a date is accepted as input, both a date-only form (`YYYY-MM-DD`)
 * and a full ISO 8601 date-time are accepted and converted on the server"): analytics' `startDate` and `endDate`,
 * a template send's `scheduledAt`.
 */

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
/** Extended format (`2026-11-27T10:00:00.000+02:00`), to the hour, minute, second or a fraction of it. */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;
/** Basic format (`20261127T100000.000+0200`), the same precisions; date and time both basic, as ISO 8601 has it. */
const DATE_TIME_BASIC = /^(\d{4})(\d{2})(\d{2})T(\d{2})(?:(\d{2})(?:(\d{2})(?:[.,](\d+))?)?)?(Z|[+-]\d{2}(?:\d{2})?)?$/i;

export const DATE_INPUT_MESSAGE = "must be a date (YYYY-MM-DD) or an ISO 8601 date-time (YYYY-MM-DDTHH:mm:ss.sssZ)";

/**
 * The instant a date input stands for, in milliseconds since the epoch, or undefined when it is not a real date. A
 * date-only value is 00:00:00.000Z of that day (UTC) as a `start`, 23:59:59.999Z as an `end` (an inclusive range's
 * end). A full ISO 8601 date-time, extended (`2026-11-27T10:00:00Z`) or basic (`20261127T100000Z`), to the hour, the
 * minute, the second or a fraction of it, without an offset is read as UTC; an offset may be `Z`, `±hh`, `±hhmm` or `±hh:mm`;
 * digits past the millisecond are dropped (the API's precision is the millisecond). Years 0001 to 9999, also once the
 * offset is applied: `0001-01-01T00:00+01:00` (year 0 in UTC) and `9999-12-31T23:00-05:00` (year 10000) are not
 * dates this API can write back as ISO 8601 UTC.
 */
export function dateInstant(value: string, edge: "start" | "end" = "start"): number | undefined {
  const d = DATE_ONLY.exec(value);
  if (d) {
    const ms = utc(Number(d[1]), Number(d[2]), Number(d[3]), 0, 0, 0, 0);
    if (ms === undefined) return undefined;
    return edge === "start" ? ms : ms + 86_400_000 - 1;
  }
  const t = DATE_TIME.exec(value) ?? DATE_TIME_BASIC.exec(value);
  if (!t) return undefined;
  const [, y, mo, da, h, mi = "0", s = "0", frac = "", zone = "Z"] = t;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return undefined;
  const local = utc(Number(y), Number(mo), Number(da), Number(h), Number(mi), Number(s), Number(frac.padEnd(3, "0").slice(0, 3)));
  if (local === undefined) return undefined;
  let offsetMin = 0;
  if (zone.toUpperCase() !== "Z") {
    const m = /^([+-])(\d{2}):?(\d{2})?$/.exec(zone)!;
    const hours = Number(m[2]);
    const minutes = Number(m[3] ?? "0");
    if (hours > 23 || minutes > 59) return undefined;
    offsetMin = (m[1] === "-" ? -1 : 1) * (hours * 60 + minutes);
  }
  const instant = local - offsetMin * 60_000;
  return instant < FIRST_INSTANT || instant > LAST_INSTANT ? undefined : instant;
}

/** 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the instants whose ISO 8601 form has a four-digit year. */
const FIRST_INSTANT = Date.parse("0001-01-01T00:00:00.000Z");
const LAST_INSTANT = Date.parse("9999-12-31T23:59:59.999Z");

/** Milliseconds of a UTC calendar time, or undefined when that day does not exist (Date.UTC would roll it over). */
function utc(y: number, m: number, d: number, h: number, mi: number, s: number, ms: number): number | undefined {
  if (y < 1 || y > 9999) return undefined;
  const date = new Date(Date.UTC(2000, 0, 1, h, mi, s, ms));
  // setUTCFullYear takes years below 100 as they are (Date.UTC would read 0050 as 1950).
  date.setUTCFullYear(y, m - 1, d);
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== m - 1 || date.getUTCDate() !== d) return undefined;
  return date.getTime();
}
