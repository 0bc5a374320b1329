import { expect } from "chai";
import request from "supertest";
import type { GatewayHarness } from "./harness";

export const PASSWORD = "correct horse battery staple";

/** Console env for tests: a cheap scrypt cost (the parameters travel with each hash). */
export const CONSOLE_ENV = { CONSOLE_SCRYPT_COST: "12" } as const;

export interface Signed {
  cookie: string;
  csrf: string;
  user: { id: string; organizationId: string; role: string; email: string };
}

let seq = 0;
export const uniqueEmail = (tag: string) => `${tag}-${process.pid}-${++seq}-${Math.random().toString(36).slice(2, 8)}@example.com`;

/** A browser of the console on `h.url`: same-origin `Origin`, the session cookie and the CSRF header. */
export function consoleClient(h: GatewayHarness, s?: Signed, url = h.url) {
  const origin = url;
  const withSession = (r: request.Test) => {
    r.set("Origin", origin);
    if (s) r.set("Cookie", s.cookie).set("X-CSRF-Token", s.csrf);
    return r;
  };
  const agent = request(url);
  return {
    get: (p: string) => withSession(agent.get(p)),
    post: (p: string) => withSession(agent.post(p)),
    patch: (p: string) => withSession(agent.patch(p)),
    put: (p: string) => withSession(agent.put(p)),
    delete: (p: string) => withSession(agent.delete(p)),
  };
}

export async function signIn(h: GatewayHarness, email: string, password = PASSWORD): Promise<Signed> {
  const res = await request(h.url).post("/console/api/session").set("Origin", h.url).send({ email, password }).expect(201);
  const setCookie = ([] as string[]).concat(res.headers["set-cookie"] ?? []);
  expect(setCookie).to.have.length(1);
  return { cookie: setCookie[0].split(";")[0], csrf: res.body.csrfToken, user: res.body.user };
}

/** An organization with a user of each role, all signed in. */
export async function organizationWithUsers(h: GatewayHarness, settings: { plan?: string } = {}) {
  const org = await h.organization(settings);
  const signed: Record<"owner" | "admin" | "member", Signed> = {} as never;
  for (const role of ["owner", "admin", "member"] as const) {
    const email = uniqueEmail(role);
    await h.admin().post(`/admin/v1/organizations/${org.id}/users`).send({ email, password: PASSWORD, role }).expect(201);
    signed[role] = await signIn(h, email);
  }
  return { ...org, ...signed };
}
