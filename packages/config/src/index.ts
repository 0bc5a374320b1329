import { z } from "zod";

/**
 * Exit status of a process whose configuration is wrong (EX_CONFIG of
 * sysexits.h): `npm start` stops the whole stack on it rather than restarting
 * the process forever.
 */
export const EXIT_CONFIG = 78;

/**
 * What a process started by the stack runner (over IPC) sends once its configuration is read and good, so that a
 * runner stopping on another process's bad variable first waits for every process's own lines.
 */
export const CONFIG_OK_MESSAGE = { type: "config-ok" } as const;

/**
 * The configuration of this process is good: with `CONFIG_CHECK_ONLY=1` (the runner checking every process's
 * variables without starting anything) the process ends here with 0; under a runner, it says so.
 */
export function configChecked(env: NodeJS.ProcessEnv = process.env): void {
  if (env.CONFIG_CHECK_ONLY === "1") process.exit(0);
  if (process.send && process.connected) process.send(CONFIG_OK_MESSAGE, undefined, undefined, () => undefined);
}

/** Raised instead of exiting when `exitOnError` is false (tests). */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join("\n"));
    this.name = "ConfigError";
  }
}

/**
 * Parses the environment once at start. Every bad or missing variable gets one
 * readable line, then the process exits non-zero: the contract asks for exactly
 * that, and it is what an SRE reading `kubectl logs` wants to see.
 */
export function parseEnv<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
  opts: { exitOnError?: boolean; service?: string; warn?: (line: string) => void } = {},
): z.infer<S> {
  const loose = looseNumbers(schema, env);
  const parsed = schema.safeParse(env);
  if (parsed.success && loose.length === 0) {
    const warn = opts.warn ?? ((line: string) => process.stderr.write(line + "\n"));
    for (const line of shortTokenWarnings(schema, parsed.data, opts.service)) warn(line);
    if (opts.exitOnError !== false) configChecked(env);
    return parsed.data;
  }
  const named = new Set(loose.map((l) => l.path[0]));
  const issues = [...loose, ...(parsed.success ? [] : parsed.error.issues.filter((i) => !named.has(String(i.path[0]))))];
  const problems = issues.map((issue) => {
    const name = issue.path.join(".") || "(environment)";
    const value = env[String(issue.path[0])];
    return `config error${opts.service ? ` [${opts.service}]` : ""}: ${name} ${value === undefined ? "is missing" : "is invalid"}: ${issue.message}`;
  });
  if (opts.exitOnError === false) throw new ConfigError(problems);
  for (const line of problems) process.stderr.write(line + "\n");
  process.exit(EXIT_CONFIG);
}

/** A number as an operator writes one: digits, an optional sign and fraction; not blank, hex, or an exponent. */
const DECIMAL = /^\s*-?(\d+(\.\d*)?|\.\d+)\s*$/;

/** The schema behind `.default()`, `.optional()` and the like. */
function innerType(s: z.ZodType): z.ZodType {
  let t = s as unknown as { _zod?: { def?: { innerType?: z.ZodType } } };
  while (t?._zod?.def?.innerType) t = t._zod.def.innerType as unknown as typeof t;
  return t as unknown as z.ZodType;
}

/**
 * Numeric variables (`z.coerce.number()`) given as something other than a decimal number: `z.coerce.number()`
 * alone reads " " as 0 (PORT=" " listened on a random port), "0x100" as 256 and "1e3" as 1000.
 */
function looseNumbers(schema: z.ZodType, env: NodeJS.ProcessEnv): Array<{ path: string[]; message: string }> {
  const shape = (schema as unknown as { shape?: Record<string, z.ZodType> }).shape;
  if (!shape) return [];
  const issues: Array<{ path: string[]; message: string }> = [];
  for (const [name, field] of Object.entries(shape)) {
    const value = env[name];
    const type = (innerType(field) as unknown as { _zod?: { def?: { type?: string } } })._zod?.def?.type;
    if (value !== undefined && type === "number" && !DECIMAL.test(value)) issues.push({ path: [name], message: "must be a decimal number" });
  }
  return issues;
}

/** `true`/`false`/`1`/`0` as a boolean; `z.coerce.boolean()` would read "false" as true. */
export const envBoolean = (def: boolean) =>
  z
    .enum(["true", "false", "1", "0", "yes", "no"], { message: "must be true or false" })
    .default(def ? "true" : "false")
    .transform((v) => v === "true" || v === "1" || v === "yes");

export const envPort = (def: number) => z.coerce.number().int().min(0).max(65535).default(def);

/** Comma-separated non-negative decimal integers of at most `max`, e.g. `5000,300000,1800000`. */
export const envIntList = (def: string, max: number) =>
  z
    .string()
    .default(def)
    .transform((s, ctx) => {
      const parts = s.split(",").map((p) => p.trim());
      const nums = parts.map(Number);
      if (parts.some((p) => !/^\d+$/.test(p)) || nums.some((n) => n > max)) {
        ctx.addIssue({ code: "custom", message: `must be comma-separated integers from 0 to ${max}` });
        return z.NEVER;
      }
      return nums;
    });

const url = (protocols: string[]) =>
  z.string().refine((s) => {
    try {
      return protocols.includes(new URL(s).protocol);
    } catch {
      return false;
    }
  }, `must be a URL (${protocols.join(" or ")})`);

/** Tokens shorter than this still work (the contract sets no minimum) but draw a warning at start. */
export const RECOMMENDED_TOKEN_LENGTH = 16;

const tokenSchemas = new WeakSet<z.ZodType>();

/**
 * A bearer or shared-secret token: any non-empty string, since the contract
 * sets no minimum length and `ADMIN_TOKEN=test-admin` must start the stack.
 * `parseEnv` warns once per token shorter than RECOMMENDED_TOKEN_LENGTH.
 */
export function envToken() {
  const schema = z.string().min(1, "must not be empty");
  tokenSchemas.add(schema);
  return schema;
}

/** One warning line per `envToken()` variable of an object schema whose value is short. */
export function shortTokenWarnings(schema: z.ZodType, values: unknown, service?: string): string[] {
  // Duck-typed rather than `instanceof z.ZodObject`, which fails across two copies of zod.
  const shape = (schema as { shape?: Record<string, z.ZodType> }).shape ?? {};
  const record = (values ?? {}) as Record<string, unknown>;
  return Object.entries(shape)
    .filter(([name, field]) => tokenSchemas.has(field) && typeof record[name] === "string" && (record[name] as string).length < RECOMMENDED_TOKEN_LENGTH)
    .map(
      ([name]) =>
        `config warning${service ? ` [${service}]` : ""}: ${name} is shorter than ${RECOMMENDED_TOKEN_LENGTH} characters; use a long random value outside development`,
    );
}

/** Variables every service shares: where Postgres and NATS are, and how to log. */
export const baseEnv = {
  /** One database; each service owns one schema in it and creates what it needs. */
  DATABASE_URL: url(["postgres:", "postgresql:"]).default("postgres://postgres@127.0.0.1:5432/messaging"),
  /** NATS with JetStream. */
  NATS_URL: z
    .string()
    .default("nats://127.0.0.1:4222")
    .refine((s) => s.split(",").every((u) => /^(nats|tls|ws|wss):\/\/[^\s]+$/.test(u.trim())), "must be nats://host:port"),
  /** Prefix for stream names and subjects, so two test runs on one NATS never collide. Empty in production. */
  BUS_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9_]*$/, "lowercase letters, digits and _ only")
    .default(""),
  /** Copies of every JetStream stream: 1 on a single NATS server, 3 on a 3-node cluster (the prod overlay). */
  BUS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /** pino level; JSON logs on stdout. */
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
};

/** Variables of every service that the gateway calls. */
export const internalServiceEnv = {
  ...baseEnv,
  /** Port of this service's internal HTTP API (only the gateway calls it). */
  PORT: envPort(0),
  /** Address the HTTP server binds: loopback by default (npm start, tests); `0.0.0.0` in a container. */
  HOST: z.string().min(1).default("127.0.0.1"),
  /** Shared by the gateway and the services; a service refuses calls without it. */
  INTERNAL_TOKEN: envToken(),
  /**
   * The high-volume background consumers (inbound-message batches, domain events, keyword opt-outs) step back while this
   * process serves requests and its event loop is later than this many ms, or a query waits for a connection: an
   * eighth of their concurrency in flight until it is calm again, so those requests keep their latency (0: never
   * by lag).
   */
  CONSUMER_YIELD_LAG_MS: z.coerce.number().int().min(0).max(10_000).default(50),
  /**
   * While HTTP requests are served anywhere in the stack and some task waited for a CPU more than this share of the
   * last 50 ms (Linux pressure stall information of the container, else of the machine), the background consumers
   * step back too, also in processes that serve nobody themselves (0: never by CPU pressure).
   */
  CONSUMER_YIELD_CPU_PRESSURE: z.coerce.number().min(0).max(1).default(0.02),
};

export { url as envUrl };
