import type { Router } from "express";
import { AcceptInvitationRequest, SignInRequest } from "@platform/contracts";
import { ApiError, parseBody } from "@platform/http";
import { clearSessionCookie, cookieOf, SESSION_COOKIE, sessionOf, setSessionCookie } from "../auth/console";
import type { ConsoleSessions } from "../use-cases/console-sessions";
import type { ConsoleUsers } from "../use-cases/console-users";

/** Routes without a session (the Origin check still applies): sign in, sign out, accept an invitation. */
export function registerConsoleSession(router: Router, deps: { sessions: ConsoleSessions; users: ConsoleUsers; ttlSeconds: number }): void {
  const { sessions, users } = deps;

  router.post("/console/api/session", async (req, res) => {
    const { id, answer } = await sessions.signIn(parseBody(SignInRequest, req), req.socket.remoteAddress ?? "unknown");
    setSessionCookie(res, id, deps.ttlSeconds);
    res.status(201).json(answer);
  });

  router.get("/console/api/session", async (req, res) => {
    const id = cookieOf(req, SESSION_COOKIE);
    const active = id ? await sessions.resolve(id) : null;
    if (!active) throw new ApiError("UNAUTHORIZED", "Sign in first");
    res.json(sessions.answer(active));
  });

  router.post("/console/api/invitations/accept", async (req, res) => {
    res.status(201).json(await users.accept(parseBody(AcceptInvitationRequest, req)));
  });
}

/** Sign-out, behind the session and its CSRF token but before the role check: every role may sign out. */
export function registerConsoleSignOut(router: Router, deps: { sessions: ConsoleSessions }): void {
  router.delete("/console/api/session", async (_req, res) => {
    await deps.sessions.signOut(sessionOf(res).session.idHash);
    clearSessionCookie(res);
    res.status(204).end();
  });
}
