#!/usr/bin/env node
/**
 * `provider-simulator`: runs the fake provider until SIGINT/SIGTERM.
 * Prints `{"level":"info",...,"msg":"provider simulator listening","port":N}` once listening (whatever LOG_LEVEL), so
 * a parent process started with PORT=0 can read the chosen port.
 */
import { startSimulator, type StatusDelaysMs } from "./index";

/** Levels as the services' logs name them (pino's), quietest last. */
const LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];
/** LOG_LEVEL as every service reads it; an unknown value logs as `info`. */
const threshold = Math.max(0, LEVELS.indexOf(process.env.LOG_LEVEL ?? "info"));

/** One JSON log line on stdout, shaped like the services' (`level`, `time`, `service`, `msg`), at or above LOG_LEVEL. */
function line(fields: Record<string, unknown>, level: "info" | "warn" = "info"): void {
  if (LEVELS.indexOf(level) < threshold) return;
  process.stdout.write(JSON.stringify({ level, time: new Date().toISOString(), service: "provider-simulator", ...fields }) + "\n");
}

function parseEnv(env: NodeJS.ProcessEnv) {
  const problems: string[] = [];
  const port = Number(env.PORT ?? "0");
  if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push(`PORT: must be an integer 0 to 65535, got "${env.PORT}"`);

  const webhookUrl = env.PROVIDER_WEBHOOK_URL || undefined;
  if (webhookUrl !== undefined && !URL.canParse(webhookUrl)) problems.push(`PROVIDER_WEBHOOK_URL: not a URL, got "${webhookUrl}"`);

  const rawDelays = env.SIM_STATUS_DELAYS_MS ?? "50,150,300";
  const parts = rawDelays.split(",").map((s) => Number(s.trim()));
  let statusDelaysMs: StatusDelaysMs = { sent: 50, delivered: 150, read: 300 };
  if (parts.length !== 3 || parts.some((n) => !Number.isFinite(n) || n < 0)) {
    problems.push(`SIM_STATUS_DELAYS_MS: must be three non-negative numbers "sent,delivered,read", got "${rawDelays}"`);
  } else {
    statusDelaysMs = { sent: parts[0], delivered: parts[1], read: parts[2] };
  }

  return {
    problems,
    options: {
      port,
      host: env.SIM_HOST || "127.0.0.1",
      webhookUrl,
      appSecret: env.PROVIDER_APP_SECRET || "dev-app-secret",
      accessToken: env.PROVIDER_ACCESS_TOKEN || "dev-provider-token",
      statusDelaysMs,
    },
  };
}

async function main(): Promise<void> {
  const { problems, options } = parseEnv(process.env);
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`provider-simulator: ${p}\n`);
    process.exit(78); // EX_CONFIG: the stack stops rather than restarting it
  }
  // As @platform/config's configChecked (this package depends on none of the platform's).
  if (process.env.CONFIG_CHECK_ONLY === "1") process.exit(0);
  if (process.send && process.connected) process.send({ type: "config-ok" }, undefined, undefined, () => undefined);
  const sim = await startSimulator({
    ...options,
    onLog: ({ level, ...entry }) => line(entry, level),
  });
  // Always printed, whatever LOG_LEVEL: a parent started with PORT=0 reads the port from it.
  process.stdout.write(JSON.stringify({ level: "info", time: new Date().toISOString(), service: "provider-simulator", msg: "provider simulator listening", port: sim.port, url: sim.url, webhookUrl: options.webhookUrl ?? null }) + "\n");

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    line({ msg: "provider simulator stopping", signal });
    sim.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  // Under `npm start` (an IPC channel to the supervisor): stop when the supervisor is gone.
  if (process.send) process.once("disconnect", () => stop("supervisor gone"));
}

main().catch((error: unknown) => {
  process.stderr.write(`provider-simulator: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
