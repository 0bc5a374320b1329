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
  /** Name of this replica in rate-limit gossip; defaults to the host name and pid. */
  REPLICA_ID: z.string().optional(),
});
export type GatewayEnv = z.infer<typeof envSchema>;
