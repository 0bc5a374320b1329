import type { Request } from "express";
import { z } from "zod";
import { ApiError, type ErrorDetail } from "./errors";

/** One detail per issue, each (path, message) once: two checks of one schema may say the same thing. */
export function zodDetails(error: z.ZodError, prefix?: string): ErrorDetail[] {
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
  for (const issue of error.issues) {
    const path = [prefix, ...issue.path.map(String)].filter((p) => p !== undefined && p !== "").join(".") || (prefix ?? "body");
    const key = `${path}\u0000${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    details.push({ path, message: issue.message });
  }
  return details;
}

/**
 * Parses the JSON body with a contracts schema; a failure is `400 VALIDATION_ERROR` with dotted paths.
 * `fast`, for bodies too large for the schema's per-value cost (a 50,000-recipient job), is a hand-written
 * reading that returns exactly the schema's output for bodies the schema accepts, and undefined for any body it
 * is unsure of: the schema then reads that body, so its answers and error details stay the schema's own.
 */
export function parseBody<S extends z.ZodType>(schema: S, req: Pick<Request, "body">, fast?: (body: Record<string, unknown>) => z.infer<S> | undefined): z.infer<S> {
  const body: unknown = req.body;
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) {
    throw ApiError.validation([{ path: "body", message: "a JSON object body is required (Content-Type: application/json)" }]);
  }
  const bad = badStringAt(body, "");
  if (bad !== undefined) throw ApiError.validation([{ path: bad.path || "body", message: bad.message }]);
  const quick = fast?.(body as Record<string, unknown>);
  if (quick !== undefined) return quick;
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw ApiError.validation(zodDetails(parsed.error));
  return parsed.data;
}

/**
 * How deep a JSON body may nest: far beyond any schema of the contract, and
 * far below what recursive code (hashing, validation, NUL checks, logging)
 * can walk without overflowing the stack.
 */
export const MAX_JSON_DEPTH = 64;

/** True when `value` nests arrays or objects deeper than `max` levels; iterative, so safe at any depth. */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node as object)) {
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** A parsed JSON body nested deeper than MAX_JSON_DEPTH is `400 VALIDATION_ERROR` before any code walks it. */
export function refuseDeepJson(body: unknown): void {
  if (body !== null && typeof body === "object" && nestedDeeperThan(body, MAX_JSON_DEPTH)) {
    throw ApiError.validation([{ path: "body", message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` }]);
  }
}

const NUL_MESSAGE = "must not contain NUL (\\u0000) characters";
const SURROGATE_MESSAGE = "must be valid Unicode (no unpaired surrogate \\uD800-\\uDFFF)";

/**
 * Why a string cannot be stored as given, or undefined: Postgres cannot store NUL in text or jsonb, and a lone
 * surrogate (`"\ud800"`, valid JSON) would be stored as U+FFFD, so the answer and what a later read returns would
 * differ. Such input is refused as a validation error rather than altered or failing in the database.
 */
function badString(s: string): string | undefined {
  if (s.includes("\u0000")) return NUL_MESSAGE;
  return s.isWellFormed() ? undefined : SURROGATE_MESSAGE;
}

/** The first string (value or key) that cannot be stored as given: its dotted path and why, or undefined. */
export function badStringAt(value: unknown, path: string): { path: string; message: string } | undefined {
  if (typeof value === "string") {
    const message = badString(value);
    return message === undefined ? undefined : { path, message };
  }
  if (value === null || typeof value !== "object") return undefined;
  // A child's path is built only when the walk goes into it (a 50,000-recipient body has 150,000 strings).
  const at = (key: string | number) => (path ? `${path}.${key}` : String(key));
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const child: unknown = value[i];
      if (typeof child === "string" ? badString(child) === undefined : child === null || typeof child !== "object") continue;
      const found = badStringAt(child, at(i));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const key of Object.keys(value)) {
    const keyMessage = badString(key);
    if (keyMessage !== undefined) return { path: path || "body", message: keyMessage };
    const child: unknown = (value as Record<string, unknown>)[key];
    if (typeof child === "string" ? badString(child) === undefined : child === null || typeof child !== "object") continue;
    const found = badStringAt(child, at(key));
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Parses query parameters; paths read `query.limit`. Repeated parameters are refused, not silently merged. */
export function parseQuery<S extends z.ZodType>(schema: S, req: Request): z.infer<S> {
  const query: Record<string, unknown> = { ...(req.query as Record<string, unknown>) };
  const repeated = Object.entries(query).filter(([, v]) => Array.isArray(v) || (typeof v === "object" && v !== null));
  if (repeated.length) {
    throw ApiError.validation(repeated.map(([k]) => ({ path: `query.${k}`, message: "must be given once, as a plain value" })));
  }
  const parsed = schema.safeParse(query);
  if (!parsed.success) throw ApiError.validation(zodDetails(parsed.error, "query"));
  return parsed.data;
}

/** Parses a value that is not a body or query (a header, a path parameter). */
export function parseValue<S extends z.ZodType>(schema: S, value: unknown, path: string): z.infer<S> {
  const bad = badStringAt(value, path);
  if (bad !== undefined) throw ApiError.validation([{ path, message: bad.message }]);
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw ApiError.validation(zodDetails(parsed.error, path));
  return parsed.data;
}
