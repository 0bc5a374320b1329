import type { ServiceDefinition } from "@platform/service";
import { consumeMessageFinalEvents } from "./bus/consumers/evt.message.final.consumer";
import { consumeProviderInbound } from "./bus/consumers/provider.inbound.consumer";
import { RecentSet, type TemplateJobsContext, type TemplateJobsDeps } from "./context";
import { entities } from "./db/entities";
import { Initial1764000000000 } from "./db/migrations/1764000000000-Initial";
import { envShape } from "./env";
import { BODY_LIMIT, buildRoutes } from "./routes";
import { startIdempotencySweeper } from "./workers/idempotency-sweeper";
import { startJobRunner } from "./workers/job-runner";

const contexts = new WeakMap<TemplateJobsDeps, TemplateJobsContext>();
function contextOf(deps: TemplateJobsDeps): TemplateJobsContext {
  let ctx = contexts.get(deps);
  if (!ctx) {
    ctx = { db: deps.db, bus: deps.bus, log: deps.log, env: deps.env, finalMessages: new RecentSet() };
    contexts.set(deps, ctx);
  }
  return ctx;
}

/**
 * template-jobs: templates (admin API, provider status updates,
 * `template.status_updated`) and bulk template send jobs, run exactly once
 * per recipient through messaging's template send RPC
 * (docs/adr/0006-template-jobs-exactly-once.md).
 */
export const definition: ServiceDefinition<typeof envShape> = {
  name: "template-jobs",
  schema: "template_jobs",
  env: envShape,
  entities,
  migrations: [Initial1764000000000],
  bodyLimit: BODY_LIMIT,
  routes: (deps) => buildRoutes(contextOf(deps)),
  async start(deps) {
    const ctx = contextOf(deps);
    await consumeProviderInbound(ctx);
    await consumeMessageFinalEvents(ctx);
    const stopRunner = startJobRunner(ctx);
    return [stopRunner, startIdempotencySweeper(ctx)];
  },
};

export { envShape } from "./env";
export { sendKey } from "./use-cases/run-job";
