/**
 * Bus catalog additions of the contacts service (beside `RPC.resolveContact`
 * and `RPC.checkOptOuts` in subjects.ts).
 */
import { z } from "zod";
import type { RpcDef } from "./subjects";

/** E.164 as `normalizePhone` produces it: `+`, a non-zero digit, up to 15 digits in all. */
export const E164 = z.string().regex(/^\+[1-9]\d{1,14}$/, "must be E.164 (normalize it first)");

/**
 * Bulk form of resolveContact (template jobs, inbound batches): contacts of many numbers in
 * one request (one multi-row insert). Numbers must already be E.164. Answers
 * `contactIds` in the order of `phones`. At most 10,000 numbers per request,
 * so the answer stays far below NATS' 1 MB payload limit.
 */
export const ResolveContactsRequest = z
  .object({
    organizationId: z.string(),
    phones: z.array(E164).min(1).max(10_000),
    /**
     * Optional, aligned with `phones` (inbound batches): each contact's profile
     * name and WhatsApp id, kept as `resolveContact` keeps them (null = unknown).
     */
    names: z.array(z.string().nullable()).max(10_000).optional(),
    waIds: z.array(z.string().nullable()).max(10_000).optional(),
  })
  .refine((r) => (r.names === undefined || r.names.length === r.phones.length) && (r.waIds === undefined || r.waIds.length === r.phones.length), {
    message: "names and waIds must be aligned with phones",
  });
export const ResolveContactsResponse = z.object({
  contactIds: z.array(z.string()),
  /** How many of the contacts this request created. */
  created: z.number().int(),
});

const rpc = <Req extends z.ZodType, Res extends z.ZodType>(subject: string, request: Req, response: Res): RpcDef<Req, Res> => ({
  subject,
  request,
  response,
});

export const CONTACTS_RPC = {
  resolveContacts: rpc("rpc.contacts.resolve-many.v1", ResolveContactsRequest, ResolveContactsResponse),
} as const;
