import { z } from "zod";

export const Timestamp = z.string().meta({ description: "ISO 8601 UTC with milliseconds", example: "2026-01-31T12:00:00.000Z" });

/** Cursor pagination of every list endpoint: `limit` 1 to 100 (default 25), opaque `cursor`. */
export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(25).meta({ description: "page size, 1 to 100" }),
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
