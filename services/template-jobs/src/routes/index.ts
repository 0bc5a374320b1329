import express, { type RequestHandler, type Router } from "express";
import { ApiError } from "@platform/http";
import type { TemplateJobsContext } from "../context";
import { adminTemplatesCreate } from "./admin_templates_create";
import { adminTemplatesList } from "./admin_templates_list";
import { adminTemplatesUpdate } from "./admin_templates_update";
import { adminTemplateJobsList } from "./admin_template-jobs_list";
import { v1TemplatesList } from "./v1_templates_list";
import { v1TemplatesSend } from "./v1_templates_send";
import { v1TemplatesSendCancel } from "./v1_templates_send_cancel";
import { v1TemplatesSendGet } from "./v1_templates_send_get";

/** The service parses bodies up to 16 MB (`/templates/send`); every other route keeps the 1 MB limit (contract section 2). */
export const BODY_LIMIT = "16mb";
const SMALL_LIMIT_BYTES = 1_048_576;
const BIG_BODY_ROUTE = /^\/api\/v1\/templates\/send\/?$/i;

function smallBodiesElsewhere(): RequestHandler {
  return (req, _res, next) => {
    const length = Number(req.headers["content-length"] ?? 0);
    if (length > SMALL_LIMIT_BYTES && !(req.method === "POST" && BIG_BODY_ROUTE.test(req.path))) {
      next(new ApiError("PAYLOAD_TOO_LARGE", "The body is over the size limit"));
      return;
    }
    next();
  };
}

export function buildRoutes(ctx: TemplateJobsContext): Router {
  const router = express.Router();
  router.use(smallBodiesElsewhere());
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
