/**
 * Templates and template send jobs (service-spec.md "POST /api/v1/templates/send",
 * contract.md sections 2 to 4), served by services/template-jobs.
 */
import { z } from "zod";
import { Id, Timestamp, page } from "./common";
import { TemplateButtonParameter, TemplateHeaderFormat } from "./messaging";
import { DATE_INPUT_MESSAGE, dateInstant } from "./dates";
import { normalizePhone } from "./phone";
import { nonPublicHostReason } from "./public-address";

/** Why a URL the provider must fetch is not public (its host is local, private or metadata), or null. */
function publicUrlProblem(raw: string): string | null {
  let host: string;
  try {
    host = new URL(raw).hostname;
  } catch {
    return null; // the URL check says why
  }
  const reason = nonPublicHostReason(host);
  return reason ? `must be a public URL, not ${reason}` : null;
}

export const TemplateStatus = z.enum(["pending", "approved", "rejected", "paused", "disabled"]);
export type TemplateStatus = z.infer<typeof TemplateStatus>;

/** The provider's numeric template id: digits, given as a string or a number. */
const ProviderTemplateId = z
  .union([z.string().trim().regex(/^\d{1,32}$/, "must be the provider's numeric template id"), z.number().int().nonnegative()])
  .transform((v) => String(v));

export const CreateTemplateRequest = z.object({
  name: z.string().trim().min(1).max(512),
  language: z.string().trim().min(1).max(32),
  category: z.string().trim().min(1).max(64).optional(),
  status: TemplateStatus,
  bodyParameterCount: z.number().int().min(0).max(20),
  providerTemplateId: ProviderTemplateId,
  templateAccountId: z.string().trim().min(1).max(64),
  headerFormat: TemplateHeaderFormat.optional(),
});
export type CreateTemplateRequest = z.infer<typeof CreateTemplateRequest>;

export const UpdateTemplateRequest = z.object({ status: TemplateStatus });

export const Template = z
  .object({
    id: Id("tpl_01jd0000000000000000000000"),
    name: z.string(),
    language: z.string(),
    category: z.string().nullable(),
    status: TemplateStatus,
    bodyParameterCount: z.number().int(),
    providerTemplateId: z.string().meta({ example: "123456" }),
    templateAccountId: z.string(),
    headerFormat: TemplateHeaderFormat.nullable(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: "Template" });
export type Template = z.infer<typeof Template>;
export const TemplateList = page(Template, "TemplateList");

/**
 * A recipient's phone: 3 to 32 characters, normalized to E.164 while it is
 * validated (one pass over up to 50,000 recipients, never a second one).
 */
const RecipientPhone = z
  .string()
  .min(3)
  .max(32)
  .transform((s, ctx) => {
    const e164 = normalizePhone(s);
    if (e164 === null) {
      ctx.addIssue({ code: "custom", message: "is not a valid phone number (use E.164, e.g. +15550001111)" });
      return z.NEVER;
    }
    return e164;
  })
  .meta({ description: "E.164 or digits with the country code; normalized on the server", example: "+15550001111" });

export const TemplateRecipient = z.object({
  phone: RecipientPhone,
  contactId: z.string().min(1).max(64).optional(),
  bodyParameters: z.array(z.string().min(1).max(1024)).max(20).optional().meta({ description: "exactly the template's bodyParameterCount" }),
  buttonParameters: z.array(TemplateButtonParameter).max(10).optional(),
});

export const TemplateSendJobRequest = z
  .object({
    templateId: z.string().min(1).max(64).meta({ description: "internal template id, or the provider's numeric template id" }),
    templateAccountId: z.string().min(1).max(64).optional().meta({ description: "required when `templateId` is numeric" }),
    messagingChannelId: z.string().min(1).max(64),
    headerMedia: z
      .object({
        url: z
          .url({ protocol: /^https?$/, error: "must be an http or https URL" })
          .max(4000)
          .superRefine((url, ctx) => {
            const problem = publicUrlProblem(url);
            if (problem) ctx.addIssue({ code: "custom", message: problem });
          })
          .meta({ description: "public http(s) URL of the media, up to 4000 characters; the provider fetches it (not a local, private or metadata address)" }),
        fileName: z.string().min(1).max(240).optional(),
      })
      .nullish(),
    recipients: z.array(TemplateRecipient).min(1).max(50_000),
    // null is accepted as absent for these three, as the job answers them (`scheduledFor: null`, `throttlePerHour: null`).
    scheduledAt: z
      .string()
      .refine((v) => dateInstant(v) !== undefined, { message: DATE_INPUT_MESSAGE })
      .nullish()
      .meta({ description: "when to start: date-only (00:00:00.000Z of that day, UTC) or full ISO 8601 (UTC when no offset is given); absent or null: now", example: "2026-12-01T09:00:00Z" }),
    throttlePerHour: z.number().int().min(1).max(100_000).nullish().meta({ description: "absent or null: no throttle beyond the channel's rate" }),
  })
  .meta({ id: "TemplateSendRequest" });
export type TemplateSendJobRequest = z.infer<typeof TemplateSendJobRequest>;

export const TemplateJobStatus = z.enum(["queued", "running", "paused", "completed", "cancelled", "failed"]);
export type TemplateJobStatus = z.infer<typeof TemplateJobStatus>;

export const TemplateJob = z
  .object({
    id: Id("job_01jd0000000000000000000000"),
    status: TemplateJobStatus,
    templateId: z.string().nullable(),
    messagingChannelId: z.string(),
    scheduledFor: Timestamp.nullable().meta({ description: "null when sending starts immediately" }),
    throttlePerHour: z.number().int().nullable(),
    recipients: z.number().int(),
    sent: z.number().int().meta({
      description:
        "recipients whose message the provider accepted; what becomes of it later (delivered, read, or failed on the way) is told by the message events, which carry `templateJobId`, and by analytics",
    }),
    failed: z.number().int().meta({ description: "recipients whose message the provider refused for good, or that could not be sent" }),
    skipped: z.number().int().meta({ description: "recipients never sent: opted out, or a phone number listed again in the job (the first entry is sent)" }),
    startedAt: Timestamp.nullable(),
    completedAt: Timestamp.nullable(),
    createdAt: Timestamp,
  })
  .meta({ id: "TemplateSendJob" });
export type TemplateJob = z.infer<typeof TemplateJob>;
/** `GET /admin/v1/organizations/{orgId}/template-jobs` (the console's list, newest first; not an /api/v1 operation). */
export const TemplateJobList = page(TemplateJob, "TemplateJobList");
export type TemplateJobList = z.infer<typeof TemplateJobList>;

/**
 * `rpc.template-jobs.job.state.v1` (asked by messaging before it retries a template send): the job's status and, for
 * a throttled job, its interval (3,600,000 / throttlePerHour ms). `status` null: no such job.
 */
export const JobStateRequest = z.object({ organizationId: z.string(), jobId: z.string() });
export const JobStateResponse = z.object({ status: TemplateJobStatus.nullable(), minIntervalMs: z.number().positive().nullable() });
export type JobStateResponse = z.infer<typeof JobStateResponse>;

export const TEMPLATE_JOBS_RPC = {
  jobState: { subject: "rpc.template-jobs.job.state.v1", request: JobStateRequest, response: JobStateResponse },
} as const;

/**
 * Core NATS broadcast (every messaging replica): these jobs stopped sending (paused, cancelled or failed) at `at`
 * (epoch ms). Messaging sends none of their batch sends asked for before then that are still waiting for their slot:
 * it hands them to its retry worker, which asks the job's state first (ADR 0018).
 */
export const TEMPLATE_JOBS_SUBJECTS = {
  jobsStopped: { subject: "bcast.template-jobs.jobs.stopped.v1", schema: z.object({ jobIds: z.array(z.string()).min(1), at: z.number() }) },
} as const;
