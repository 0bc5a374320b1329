import type { Plan } from "@platform/contracts";

/**
 * Matched as the template-jobs service's express router matches the route:
 * any letter case, one optional trailing slash. A stricter match here than
 * there would let `POST /api/v1/Templates/Send` through on any plan.
 */
const TEMPLATE_SEND = /^\/api\/v1\/templates\/send\/?$/i;

/**
 * Which actions a plan covers (contract section 2, Plans): `growth` all;
 * `starter` all but bulk template sends; `inactive` reads and ping only.
 */
export function planCovers(plan: Plan, method: string, path: string): boolean {
  const isRead = method === "GET" || method === "HEAD" || method === "OPTIONS";
  switch (plan) {
    case "growth":
      return true;
    case "starter":
      return !(method === "POST" && TEMPLATE_SEND.test(path));
    case "inactive":
      return isRead;
  }
}
