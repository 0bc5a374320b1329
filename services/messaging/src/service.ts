import { outboxRequestIdMigration, outboxTraceMigration } from "@platform/bus";
import { providerCallObserver } from "@platform/http";
import { createProviderClient } from "@platform/provider-client";
import { lateAnswerMs } from "./use-cases/deliver";
import type { ServiceDefinition } from "@platform/service";
import { CallbackWatermark } from "./bus/callback-watermark";
import { consumeProviderInbound } from "./bus/consumers/provider.inbound.consumer";
import { consumeSendWork } from "./bus/consumers/work.messaging.send.consumer";
import { serveChannelLookup } from "./bus/responders/rpc.messaging.channel.lookup";
import { serveTemplateLookup } from "./bus/responders/rpc.messaging.template.lookup";
import { serveTemplateSend } from "./bus/responders/rpc.messaging.template.send";
import { serveTemplateStop } from "./bus/responders/rpc.messaging.template.stop";
import { AcceptedSends, ContactIdCache, StoppedJobs, type MessagingContext, type MessagingDeps } from "./context";
import { entities } from "./db/entities";
import { Initial1763760000000 } from "./db/migrations/1763760000000-Initial";
import { TemplateSends1764000000000 } from "./db/migrations/1764000000000-TemplateSends";
import { AdaptivePacing1764000001000 } from "./db/migrations/1764000001000-AdaptivePacing";
import { IdempotencyMessage1764000002000 } from "./db/migrations/1764000002000-IdempotencyMessage";
import { HotStatusUpdates1764400000000 } from "./db/migrations/1764400000000-HotStatusUpdates";
import { HotConversationTouches1764600000000 } from "./db/migrations/1764600000000-HotConversationTouches";
import { IdempotencyBodyAsSent1764700000000 } from "./db/migrations/1764700000000-IdempotencyBodyAsSent";
import { CancelledTemplateSends1764800000000 } from "./db/migrations/1764800000000-CancelledTemplateSends";
import { TransientFailures1764950000000 } from "./db/migrations/1764950000000-TransientFailures";
import { envShape } from "./env";
import { buildJsonRoutes, buildRoutes } from "./routes";
import { startSweeper } from "./workers/conversation-sweeper";
import { ContactResolver, OptOutChecker } from "./use-cases/contacts";
import { BulkPacer, ChannelPacer, JobSpacer, SendSpacer } from "./use-cases/pacing";
import { SendLookups } from "./use-cases/send-lookups";
import { SendWrites } from "./use-cases/send-writes";
import { MESSAGING_SUBJECTS, TEMPLATE_JOBS_SUBJECTS } from "@platform/contracts";

/** Finer than the HTTP buckets below 100 ms: the stages of a send that must answer in under 100 ms. */
const STAGE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5];

/** One context per process: the provider adapter keeps its keep-alive sockets across requests. */
const contexts = new WeakMap<MessagingDeps, MessagingContext>();
export function contextOf(deps: MessagingDeps): MessagingContext {
  let ctx = contexts.get(deps);
  if (!ctx) {
    const provider = createProviderClient({
      baseUrl: deps.env.PROVIDER_BASE_URL,
      accessToken: deps.env.PROVIDER_ACCESS_TOKEN,
      timeoutMs: deps.env.PROVIDER_TIMEOUT_MS,
      lateAnswerMs: lateAnswerMs(deps.env.PROVIDER_UNANSWERED_RETRY_MS),
      observe: providerCallObserver(deps.metrics),
    });
    const stages = deps.metrics?.histogram(
      "messaging_send_stage_seconds",
      "Time a single send (POST /api/v1/messages) spent in each stage: lookup, opt_out, contact, store, pace, spacer, provider, record",
      ["stage"],
      STAGE_BUCKETS,
    );
    ctx = {
      db: deps.db, bus: deps.bus, log: deps.log, env: deps.env, provider, contactIds: new ContactIdCache(), lookups: new SendLookups(deps.db), pacer: new ChannelPacer(deps.db),
      bulkPacer: new BulkPacer(deps.db), spacer: new SendSpacer(), jobSpacer: new JobSpacer(), stoppedJobs: new StoppedJobs(), optOuts: new OptOutChecker(deps.bus), contactResolver: new ContactResolver(deps.bus), writes: new SendWrites(deps.db),
      accepted: new AcceptedSends(), callbacks: new CallbackWatermark(deps.bus), sendStages: stages && ((stage, seconds) => stages.observe({ stage }, seconds)),
    };
    contexts.set(deps, ctx);
  }
  return ctx;
}

export const definition: ServiceDefinition<typeof envShape> = {
  name: "messaging",
  schema: "messaging",
  env: envShape,
  entities,
  migrations: [Initial1763760000000, TemplateSends1764000000000, AdaptivePacing1764000001000, IdempotencyMessage1764000002000, outboxRequestIdMigration("messaging"), outboxTraceMigration("messaging"), HotStatusUpdates1764400000000, HotConversationTouches1764600000000, IdempotencyBodyAsSent1764700000000, CancelledTemplateSends1764800000000, TransientFailures1764950000000],
  routes: (deps) => buildRoutes(contextOf(deps)),
  jsonRoutes: (deps) => buildJsonRoutes(contextOf(deps)),
  async start(deps) {
    const ctx = contextOf(deps);
    serveChannelLookup(ctx);
    serveTemplateSend(ctx);
    serveTemplateLookup(ctx);
    serveTemplateStop(ctx);
    ctx.bus.onBroadcast(TEMPLATE_JOBS_SUBJECTS.jobsStopped, ({ jobIds, at }) => {
      for (const id of jobIds) ctx.stoppedJobs.stop(id, at);
    });
    ctx.bus.onBroadcast(MESSAGING_SUBJECTS.channelsChanged, ({ organizationId }) => ctx.lookups.forgetOrganization(organizationId));
    ctx.bus.onReconnect(() => ctx.lookups.clear());
    await consumeProviderInbound(ctx);
    await consumeSendWork(ctx);
    const stopSweeper = startSweeper(ctx);
    const stopWatermark = ctx.callbacks.start();
    // Stopped last to first: late answers are no longer waited for (their retries stand), then the recordings drain.
    return [() => ctx.provider.close(), stopSweeper, stopWatermark, () => ctx.accepted.drain(5_000), () => ctx.provider.endLateWaits()];
  },
};

export { envShape } from "./env";
/** Per-channel pacing, shared with template jobs (docs/adr/0003-channel-pacing.md). */
export {
  ADAPTIVE_PACING,
  BULK_HORIZON_MS,
  BulkPacer,
  ChannelPacer,
  channelPacingRate,
  reserveBulkPacingSlots,
  reservePacingSlot,
  reservePacingSlots,
  slowDownChannel,
  takePacingToken,
} from "./use-cases/pacing";
export { THROTTLED_RETRY_MAX_MS, transientRetryDelayMs } from "./use-cases/deliver";
