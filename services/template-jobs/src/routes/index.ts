import express, { type Router } from "express";
import type { LargeBodies } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { adminTemplatesCreate } from "./admin_templates_create";
import { adminTemplatesList } from "./admin_templates_list";
import { adminTemplatesUpdate } from "./admin_templates_update";
import { adminTemplateJobsList } from "./admin_template-jobs_list";
import { v1TemplatesList } from "./v1_templates_list";
import { v1TemplatesSend } from "./v1_templates_send";
import { v1TemplatesSendCancel } from "./v1_templates_send_cancel";
import { v1TemplatesSendGet } from "./v1_templates_send_get";

/** `/templates/send` takes bodies up to 16 MB (50,000 recipients); every other route keeps the 1 MB limit (contract section 2). */
export const LARGE_BODIES: LargeBodies = { limit: "16mb", method: "POST", path: /^\/api\/v1\/templates\/send\/?$/i };

export function buildRoutes(ctx: TemplateJobsContext): Router {
  const router = express.Router();
  v1TemplatesList(router, ctx);
  v1TemplatesSend(router, ctx);
  v1TemplatesSendGet(router, ctx);
  v1TemplatesSendCancel(router, ctx);
  adminTemplatesCreate(router, ctx);
  adminTemplatesList(router, ctx);
  adminTemplatesUpdate(router, ctx);
  adminTemplateJobsList(router, ctx);
  return router;
}
