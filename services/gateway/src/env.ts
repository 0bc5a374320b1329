import { z } from "zod";
import { baseEnv, envPort, envToken, envUrl } from "@platform/config";

const optionalUrl = envUrl(["http:", "https:"]).optional();

export const envSchema = z.object({
  ...baseEnv,
  /** The only public port. */
  PORT: envPort(8080),
  /** Address to bind; every interface when unset (the gateway is the public edge). */
  HOST: z.string().min(1).optional(),
  /** Bearer token of the admin API (`/admin/v1`). `npm start` generates one in development. Any length; a short one is warned about at start. */
  ADMIN_TOKEN: envToken(),
  /** Shared with the services; they refuse calls without it. Any length; a short one is warned about at start. */
  INTERNAL_TOKEN: envToken(),
  /** Key of the provider's inbound webhook signatures (`X-Hub-Signature-256`). */
  PROVIDER_APP_SECRET: z.string().min(1).default("dev-app-secret"),
  /** Answer check of the provider's subscription handshake. */
  PROVIDER_VERIFY_TOKEN: z.string().min(1).default("dev-verify-token"),
  /** Default per-organization token bucket: refill per second … */
  RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).default(50),
  /** … and capacity. */
  RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(100),
  /** Base URLs of the services behind the gateway; a route whose service is not configured answers 503. */
  MESSAGING_URL: optionalUrl,
  CONTACTS_URL: optionalUrl,
  WEBHOOK_DISPATCHER_URL: optionalUrl,
  TEMPLATE_JOBS_URL: optionalUrl,
  ANALYTICS_URL: optionalUrl,
  /** Timeout of one proxied call to a service. */
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /**
   * Proxied calls in flight at once to one service, per gateway replica (its keep-alive pool's sockets). Beyond it the
   * gateway answers 503 SERVICE_UNAVAILABLE with `Retry-After: 1` at once instead of queueing the call in memory, so a
   * stalled service cannot exhaust the gateway's heap (each waiting call holds about 16 KB; ADR 0015). A send may wait
   * up to 2 s in messaging for its channel's pacing slot: a channel driven at its full rate keeps twice its rate waiting.
   */
  UPSTREAM_MAX_IN_FLIGHT: z.coerce.number().int().min(1).default(1_024),
  /**
   * Of those, the calls one organization may hold at once (default three quarters of `UPSTREAM_MAX_IN_FLIGHT`); its next
   * ones are answered 429 RATE_LIMITED with `Retry-After: 1`, so one organization's stalled uploads or full-rate bursts
   * always leave room for the others' calls (ADR 0015, addendum).
   */
  UPSTREAM_MAX_IN_FLIGHT_PER_ORGANIZATION: z.coerce.number().int().min(1).optional(),
  /** Console (issue 15, ADR 0009): lifetime of a signed-in session. */
  CONSOLE_SESSION_TTL_SECONDS: z.coerce.number().int().min(60).default(8 * 3600),
  /** Sign-in attempts allowed per email and per client address in one window. */
  CONSOLE_SIGN_IN_PER_EMAIL: z.coerce.number().int().min(1).default(10),
  CONSOLE_SIGN_IN_PER_IP: z.coerce.number().int().min(1).default(100),
  CONSOLE_SIGN_IN_WINDOW_SECONDS: z.coerce.number().int().min(1).default(900),
  /** log2 of scrypt's N for new password hashes; p follows OWASP's table (15: N=2^15, r=8, p=3). */
  CONSOLE_SCRYPT_COST: z.coerce.number().int().min(10).max(20).default(15),
  /** Origins (`https://console.example.com`, comma-separated) allowed to change state; unset: the request's own host only. */
  CONSOLE_ORIGINS: z
    .string()
    .optional()
    .transform((v) => (v ? v.split(",").map((o) => o.trim()).filter(Boolean) : [])),
  /** Name of this replica in rate-limit gossip; defaults to the host name and pid. */
  REPLICA_ID: z.string().optional(),
});
export type GatewayEnv = z.infer<typeof envSchema>;
