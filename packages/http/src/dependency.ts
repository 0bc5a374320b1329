/** Network errors of a connection to Postgres, NATS or another service. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);

/**
 * SQLSTATEs of a database that is down, starting, stopping, full or not
 * accepting connections: class 08 (connection exception) and these.
 */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300", "55000"]);

/** pg's and pg-pool's own messages for a connection that ended or never came. */
const CONNECTION_MESSAGES = [/^Connection terminated/i, /timeout exceeded when trying to connect/i, /Client has encountered a connection error/i];

/** Errors the bus raises when NATS cannot be reached or nobody answers. */
const BUS_ERRORS = new Set(["BusUnavailableError", "NatsError"]);

/**
 * True when `err` says a dependency (Postgres, NATS) is down or unreachable
 * rather than that the request was wrong: such a failure is answered 503
 * SERVICE_UNAVAILABLE (safe to retry), never 500. Looks through TypeORM's
 * `driverError` and an error's `cause`.
 */
export function isDependencyDown(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== "object" || depth > 3) return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; driverError?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === "string") {
    if (NETWORK_CODES.has(e.code) || UNAVAILABLE_SQLSTATES.has(e.code) || /^08[0-9A-Z]{3}$/.test(e.code)) return true;
  }
  if (typeof e.name === "string" && BUS_ERRORS.has(e.name)) return true;
  if (typeof e.message === "string" && CONNECTION_MESSAGES.some((re) => re.test(e.message as string))) return true;
  // Node's AggregateError (a connect that tried IPv4 and IPv6) carries the network errors in `errors`.
  if (Array.isArray(e.errors) && e.errors.some((inner) => isDependencyDown(inner, depth + 1))) return true;
  return isDependencyDown(e.driverError, depth + 1) || isDependencyDown(e.cause, depth + 1);
}
