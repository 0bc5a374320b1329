import type { Metrics } from "@platform/http";
import type { RateLimiter } from "./limiter";

/**
 * The shared rate limit's usage messages (ADR 0002): published at once (`prompt`, an organization near its budget),
 * by the 200 ms timer (`timer`), and received from other replicas (`received`). Read from the limiter's own tally at
 * scrape time, so the admission path counts nothing extra.
 */
export function instrumentRateLimitSync(metrics: Metrics, limiter: RateLimiter): void {
  const tally = () => ({ prompt: limiter.stats.promptPublishes, timer: limiter.stats.timerPublishes, received: limiter.stats.received });
  const seen = { prompt: 0, timer: 0, received: 0 };
  const counter = new metrics.client.Counter({
    name: "gateway_rate_limit_sync_messages_total",
    help: "Rate-limit usage messages between gateway replicas: published (prompt, timer) and received",
    labelNames: ["kind"],
    registers: [metrics.registry],
    collect() {
      const now = tally();
      for (const kind of ["prompt", "timer", "received"] as const) {
        if (now[kind] > seen[kind]) this.inc({ kind }, now[kind] - seen[kind]);
        seen[kind] = now[kind];
      }
    },
  });
  for (const kind of ["prompt", "timer", "received"]) counter.inc({ kind }, 0);
}
