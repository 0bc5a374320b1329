import { timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import { ApiError } from "@platform/http";

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
