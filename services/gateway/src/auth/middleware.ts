import { timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import { ApiError } from "@platform/http";
import { bearerKey, hashApiKey } from "./api-keys";
import type { AuthCache } from "./key-cache";
import { planCovers } from "../plans";
import { rateLimitHeaders, type RateLimiter } from "../rate-limit/limiter";

const unauthorized = () => new ApiError("UNAUTHORIZED", "Invalid API key");

/**
 * API key → organization (cached), then the organization's token bucket.
 * A missing, malformed, unknown or revoked key is the same 401.
 */
export function apiKeyAuth(cache: AuthCache, limiter: RateLimiter): RequestHandler {
  return async (req, res, next) => {
    const key = bearerKey(req.header("authorization"));
    if (!key) throw unauthorized();
    const principal = await cache.principal(hashApiKey(key));
    if (!principal) throw unauthorized();
    const org = await cache.organization(principal.organizationId);
    if (!org) throw unauthorized();
    res.locals.organizationId = org.id;
    res.locals.plan = org.plan;
    const decision = limiter.take(org.id, org.rateLimit);
    res.set(rateLimitHeaders(org.rateLimit, decision));
    if (!decision.allowed) {
      throw new ApiError("RATE_LIMITED", "Too many requests", undefined, { "Retry-After": String(decision.retryAfterSeconds) });
    }
    next();
  };
}

/** 402 when the organization's plan does not cover this action. */
export const planGuard: RequestHandler = (req, res, next) => {
  if (!planCovers(res.locals.plan, req.method, req.originalUrl.split("?")[0])) {
    throw new ApiError("PAYMENT_REQUIRED", "The organization's plan does not cover this action");
  }
  next();
};

export function adminAuth(token: string): RequestHandler {
  const expected = Buffer.from(token);
  return (req, _res, next) => {
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(req.header("authorization") ?? "");
    const given = Buffer.from(match?.[1] ?? "");
    if (!match || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new ApiError("UNAUTHORIZED", "Invalid admin token");
    }
    next();
  };
}
