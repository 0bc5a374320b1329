import type { Plan } from "@platform/contracts";

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
      return !(method === "POST" && /^\/api\/v1\/templates\/send\/?$/.test(path));
    case "inactive":
      return isRead;
  }
}
