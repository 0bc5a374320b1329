import pino from "pino";

export type Logger = pino.Logger;

/**
 * JSON logs on stdout: a constant message plus fields, e.g.
 * `log.error({ webhookId, attempt }, "webhook delivery failed")`.
 * Secrets are redacted wherever they might appear in a logged object.
 */
export function createLogger(service: string, level: string = process.env.LOG_LEVEL ?? "info", destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        "secret",
        "*.secret",
        "key",
        "*.key",
        "token",
        "*.token",
        "req.headers.authorization",
        'req.headers["x-internal-token"]',
        "headers.authorization",
      ],
      censor: "[redacted]",
    },
    formatters: { level: (label) => ({ level: label }) },
  };
  return destination ? pino(options, destination) : pino(options);
}
