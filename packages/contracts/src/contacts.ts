/**
 * Bus catalog additions of the contacts service (beside `RPC.resolveContact`
 * and `RPC.checkOptOuts` in subjects.ts).
 */
import { z } from "zod";
import type { RpcDef } from "./subjects";
import { PROVIDER_MESSAGE_ID_MAX_LENGTH } from "./messaging";

/** E.164 as `normalizePhone` produces it: `+`, a non-zero digit, up to 15 digits in all. */
export const E164 = z.string().regex(/^\+[1-9]\d{1,14}$/, "must be E.164 (normalize it first)");

/**
 * Bulk form of resolveContact (template jobs, inbound batches): contacts of many numbers in
 * one request (one multi-row insert). Numbers must already be E.164. Answers
 * `contactIds` in the order of `phones`. At most 10,000 numbers per request,
 * so the answer stays far below NATS' 1 MB payload limit.
 */
/**
 * Trimmed texts longer than this are never sent for keyword matching (`inbound` below): every keyword is at most 64
 * characters (the admin API's limit), and Unicode normalization can shorten a text by a few characters, not by this many.
 */
export const KEYWORD_CANDIDATE_MAX_LENGTH = 256;

/**
 * An inbound message of the batch, for keyword opt-outs (contacts owns the keyword lists and the opt-outs):
 * `key` is the provider's message id, so a redelivered message opts nobody out twice.
 */
export const InboundForKeywords = z.object({
  key: z.string().min(1).max(PROVIDER_MESSAGE_ID_MAX_LENGTH),
  messagingChannelId: z.string().min(1),
  phone: E164,
  type: z.string(),
  text: z.string().max(KEYWORD_CANDIDATE_MAX_LENGTH).nullable(),
});
export type InboundForKeywords = z.infer<typeof InboundForKeywords>;

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
    /**
     * Optional (inbound batches): the batch's new inbound messages whose text may be a keyword. Contacts applies the
     * keyword opt-outs they trigger before answering (ADR 0014), after their senders' contacts exist.
     */
    inbound: z.array(InboundForKeywords).max(10_000).optional(),
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
