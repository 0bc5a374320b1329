import { z } from "zod";

export const Timestamp = z.string().meta({ description: "ISO 8601 UTC with milliseconds", example: "2026-01-31T12:00:00.000Z" });

const LIMIT_MESSAGE = "must be a whole number from 1 to 100";

/**
 * A query's `limit`: only a plain decimal integer (`/^[0-9]+$/`, so `05` is 5) from 1 to 100. `z.coerce.number()`
 * would take `1e2`, `0x10`, `1.0`, `+5` or ` 5` (JavaScript's `Number()`); those stay strings here and are refused.
 */
const Limit = z.preprocess(
  (v) => (typeof v === "string" && /^[0-9]+$/.test(v) ? Number(v) : v),
  z.number({ error: LIMIT_MESSAGE }).int({ error: LIMIT_MESSAGE }).min(1, { error: LIMIT_MESSAGE }).max(100, { error: LIMIT_MESSAGE }),
);

/** Cursor pagination of every list endpoint: `limit` 1 to 100 (default 25), opaque `cursor`. */
export const PageQuery = z.object({
  limit: Limit.default(25).meta({ description: "page size, 1 to 100", type: "integer", minimum: 1, maximum: 100, default: 25 }),
  // Any string: one this service did not issue (empty, too long, tampered) is 400 INVALID_CURSOR from the codec.
  cursor: z.string().optional().meta({ description: "`nextCursor` of the previous page" }),
});
export type PageQuery = z.infer<typeof PageQuery>;

export const page = <T extends z.ZodType>(item: T, id: string) =>
  z
    .object({
      items: z.array(item),
      nextCursor: z.string().optional().meta({ description: "absent when the end has been reached" }),
    })
    .meta({ id });

/** `id` fields: prefixed opaque strings. */
export const Id = (example: string) => z.string().min(1).max(64).meta({ example });
