import express, { type Router } from "express";

export type ReadinessCheck = () => Promise<void>;

/** `/healthz`: the process is alive. `/readyz`: every check passes, else 503 with the failing parts. */
export function healthRoutes(checks: Record<string, ReadinessCheck>, timeoutMs = 2_000): Router {
  const router = express.Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const results = await runChecks(checks, timeoutMs);
    const failing = Object.entries(results).filter(([, v]) => v !== "ok");
    res.status(failing.length ? 503 : 200).json({ status: failing.length ? "unavailable" : "ok", checks: results });
  });
  return router;
}

export async function runChecks(checks: Record<string, ReadinessCheck>, timeoutMs: number): Promise<Record<string, string>> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          check(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
        return [name, "ok"] as const;
      } catch (err) {
        return [name, (err as Error).message || "failed"] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return Object.fromEntries(entries);
}
