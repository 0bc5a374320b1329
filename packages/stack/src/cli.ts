#!/usr/bin/env node
import { baseEnv, EXIT_CONFIG } from "@platform/config";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { checkConfiguration, checkDatabaseLogin, checkDependencies, DEFAULT_DATABASE_URL, DEFAULT_NATS_URL, portInUse, startStack } from "./index";

/**
 * The INTERNAL_TOKEN of a development stack on this database, generated once and kept in `.stack/` (git-ignored) at
 * the repository's root: it also signs the lists' cursors, so a client paging through a list across a restart of
 * `npm start` keeps its cursor (a new token each run made them 400 INVALID_CURSOR).
 */
function developmentInternalToken(databaseUrl: string): string {
  const dir = path.resolve(__dirname, "../../../.stack");
  const file = path.join(dir, `internal-token-${createHash("sha256").update(databaseUrl).digest("hex").slice(0, 16)}`);
  try {
    const kept = readFileSync(file, "utf8").trim();
    if (kept.length >= 32) return kept;
  } catch {
    // none yet
  }
  const token = `int_${randomBytes(24).toString("base64url")}`;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(file, token + "\n", { mode: 0o600 });
  } catch {
    // A read-only checkout: this run's token only.
  }
  return token;
}

/** `npm start`: the whole stack in the foreground until Ctrl-C. */
async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
  const natsUrl = process.env.NATS_URL ?? DEFAULT_NATS_URL;
  const rawPort = (process.env.PORT ?? "8080").trim();
  const port = Number(rawPort);
  // The runner's own variables first (it needs them to start anything), by the rules every service applies: decimal
  // digits only (Number() alone reads 0x1F90 as 8080 and 1e4 as 10000).
  const portOk = /^\d+$/.test(rawPort) && port >= 1 && port <= 65535;
  const database = baseEnv.DATABASE_URL.safeParse(databaseUrl);
  const nats = baseEnv.NATS_URL.safeParse(natsUrl);
  const problems = [
    ...(portOk ? [] : ["PORT is invalid: must be a port number (1 to 65535)"]),
    ...(database.success ? [] : [`DATABASE_URL is invalid: ${database.error.issues[0].message}`]),
    ...(nats.success ? [] : [`NATS_URL is invalid: ${nats.error.issues[0].message}`]),
  ];
  if (problems.length > 0) {
    for (const line of problems) process.stderr.write(`config error [stack]: ${line}\n`);
    // Then every process's other variables (their lines follow), the runner's own replaced by good values.
    await checkConfiguration({
      port: portOk ? port : 8080,
      databaseUrl: database.success ? databaseUrl : DEFAULT_DATABASE_URL,
      natsUrl: nats.success ? natsUrl : DEFAULT_NATS_URL,
    });
    process.exit(EXIT_CONFIG);
  }
  // Otherwise the gateway would restart on EADDRINUSE forever, and "ready" would be another process's answer.
  if (await portInUse(port)) {
    process.stderr.write(`port ${port} is in use (another \`npm start\`?): stop it, or start this one with PORT=<another port>\n`);
    process.exit(1);
  }
  const problem = await checkDependencies(databaseUrl, natsUrl);
  if (problem) {
    process.stderr.write(problem + "\n");
    process.exit(1);
  }
  const login = await checkDatabaseLogin(databaseUrl);
  if (login) {
    process.stderr.write(`config error [stack]: ${login}\n`);
    process.exit(EXIT_CONFIG);
  }
  const generatedAdmin = !process.env.ADMIN_TOKEN;
  let stopping = false;
  const stop = async (reason: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`[stack] ${reason}: stopping every service\n`);
    await stack.stop();
    process.exit(exitCode);
  };
  const stack = await startStack({
    port,
    databaseUrl,
    natsUrl,
    internalToken: process.env.INTERNAL_TOKEN ?? developmentInternalToken(databaseUrl),
    pretty: process.stdout.isTTY === true,
    rawJson: process.stdout.isTTY !== true,
    // A bad variable is fixed by the operator, not by a restart: the whole stack stops, non-zero.
    onConfigError: (name) => void stop(`${name} has a configuration error`, EXIT_CONFIG),
  });
  // npm forwards the terminal's Ctrl-C too, so a signal may come twice: the first one counts.
  process.on("SIGINT", () => void stop("SIGINT", 0));
  process.on("SIGTERM", () => void stop("SIGTERM", 0));
  // The parent (npm) killed outright cannot pass a signal on: notice it and stop rather than run on unowned.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void stop("parent process gone", 0);
  }, 1_000).unref();
  try {
    await stack.waitReady();
    const lines = [
      `[stack] ready: ${stack.url} (services: ${stack.names().join(", ")})`,
      ...(stack.simulatorUrl ? [`[stack] provider simulator: ${stack.simulatorUrl} (inject inbound messages: POST ${stack.simulatorUrl}/_sim/inbound)`] : []),
      generatedAdmin ? `[stack] admin token (generated for this run): ${stack.adminToken}` : `[stack] admin token: from ADMIN_TOKEN`,
      `[stack] try: curl -s -X POST ${stack.url}/admin/v1/organizations -H "Authorization: Bearer ${generatedAdmin ? stack.adminToken : "$ADMIN_TOKEN"}" -H "Content-Type: application/json" -d '{"name":"Acme"}'`,
    ];
    for (const l of lines) process.stdout.write(l + "\n");
  } catch (err) {
    if (!stopping) process.stdout.write(`[stack] not ready yet: ${(err as Error).message}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`stack failed: ${(err as Error).message}\n`);
  process.exit(1);
});
