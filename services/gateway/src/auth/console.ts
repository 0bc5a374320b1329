import { timingSafeEqual } from "node:crypto";
import type { Request, RequestHandler, Response } from "express";
import type { ConsoleRole } from "@platform/contracts";
import { ApiError } from "@platform/http";
import type { ActiveSession, ConsoleSessions } from "../use-cases/console-sessions";

/**
 * `__Host-` prefix: the browser keeps it only when Secure, Path=/ and without
 * Domain, so a sibling subdomain cannot plant or shadow it.
 */
export const SESSION_COOKIE = "__Host-console-session";
export const CSRF_HEADER = "x-csrf-token";

export function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function setSessionCookie(res: Response, id: string, maxAgeSeconds: number): void {
  res.setHeader("Set-Cookie", `${SESSION_COOKIE}=${id}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; Secure; SameSite=Strict`);
}
export function clearSessionCookie(res: Response): void {
  res.setHeader("Set-Cookie", `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict`);
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);
export const isStateChange = (req: Request) => !SAFE.has(req.method);

/**
 * Origin check of a state change: the browser's `Origin` must be present and
 * one of `allowed`, or, with none configured, the request's own host.
 * Modern browsers send Origin on every non-GET fetch, so a missing one is refused.
 */
export function checkOrigin(allowed: string[]): RequestHandler {
  return (req, _res, next) => {
    if (!isStateChange(req)) return next();
    const origin = req.header("origin");
    if (!origin || origin === "null") throw new ApiError("FORBIDDEN", "Missing Origin header");
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      throw new ApiError("FORBIDDEN", "Invalid Origin header");
    }
    const ok = allowed.length > 0 ? allowed.includes(origin) : host === req.header("host");
    if (!ok) throw new ApiError("FORBIDDEN", "Cross-origin request refused");
    next();
  };
}

export const sessionOf = (res: Response): ActiveSession => res.locals.console as ActiveSession;

/** The session of the cookie (401 without one), its organization for everything behind, and the synchronizer token on state changes. */
export function consoleSession(sessions: ConsoleSessions): RequestHandler {
  return async (req, res, next) => {
    const id = cookieOf(req, SESSION_COOKIE);
    const active = id ? await sessions.resolve(id) : null;
    if (!active) throw new ApiError("UNAUTHORIZED", "Sign in first");
    if (isStateChange(req)) {
      const given = Buffer.from(req.header(CSRF_HEADER) ?? "");
      const expected = Buffer.from(active.session.csrfToken);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new ApiError("FORBIDDEN", "Missing or invalid CSRF token");
    }
    res.locals.console = active;
    res.locals.organizationId = active.session.organizationId;
    // Never forwarded to a service: they authenticate the gateway, not the person.
    delete req.headers.cookie;
    delete req.headers[CSRF_HEADER];
    next();
  };
}

/** Reads for every role; a state change needs one of `roles`. */
export function requireRole(...roles: ConsoleRole[]): RequestHandler {
  return (_req, res, next) => {
    if (!roles.includes(sessionOf(res).user.role)) throw new ApiError("FORBIDDEN", "Your role does not allow this");
    next();
  };
}
export function writesNeed(...roles: ConsoleRole[]): RequestHandler {
  const check = requireRole(...roles);
  return (req, res, next) => (isStateChange(req) ? check(req, res, next) : next());
}
