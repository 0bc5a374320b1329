import type { Plan } from "@platform/contracts";
import { ApiError } from "@platform/http";
import { isIdempotencyKey } from "./idempotency-scopes";

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

/**
 * Whether the plan refuses a request the gateway forwards. A keyed request (`keyed`: its endpoint) with a well-formed
 * `Idempotency-Key` goes on to its service marked as refused, which answers the key's first answer or 402 (ADR 0026):
 * true. Any other request the plan does not cover is answered 402 here (thrown).
 */
export function planRefuses(plan: Plan, method: string, path: string, keyed: string | undefined, key: string | string[] | undefined): boolean {
  if (planCovers(plan, method, path)) return false;
  if (keyed && isIdempotencyKey(key)) return true;
  throw ApiError.paymentRequired();
}
