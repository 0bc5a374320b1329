import type { DataSource } from "typeorm";
import type { Bus } from "@platform/bus";
import { BoundedMap } from "@platform/runtime";
import type { Logger } from "@platform/logging";
import type { ProviderClient } from "@platform/provider-client";
import type { ServiceDeps, ServiceEnv } from "@platform/service";
import type { envShape } from "./env";
import type { ContactResolver, OptOutChecker } from "./use-cases/contacts";
import type { SendWrites } from "./use-cases/send-writes";
import type { BulkPacer, ChannelPacer, JobSpacer, SendSpacer } from "./use-cases/pacing";
import type { SendLookups } from "./use-cases/send-lookups";
import type { CallbackWatermark } from "./bus/callback-watermark";

export type MessagingEnv = ServiceEnv<typeof envShape>;
export type MessagingDeps = ServiceDeps<MessagingEnv>;

/** What the use cases need: connections, config and the provider adapter (one per process). */
export interface MessagingContext {
  db: DataSource;
  bus: Bus;
  log: Logger;
  env: MessagingEnv;
  provider: ProviderClient;
  contactIds: ContactIdCache;
  /** Channels and open service windows of the send path, cached (see SendLookups for why that is safe). */
  lookups: SendLookups;
  pacer: ChannelPacer;
  /** Bulk (template) reservations, one loop per channel for every batch in flight. */
  bulkPacer: BulkPacer;
  /** Provider calls of this process kept one top-rate interval apart per channel (late slots never burst). */
  spacer: SendSpacer;
  /** Template jobs that stopped sending (paused, cancelled, failed), by when (epoch ms, template-jobs' broadcast). */
  stoppedJobs: StoppedJobs;
  /** Throttled template jobs' spacing on the clock of the provider calls (`throttlePerHour`). */
  jobSpacer: JobSpacer;
  optOuts: OptOutChecker;
  /** Contacts of first sends to a phone, resolved together (resolve-many). */
  contactResolver: ContactResolver;
  /** Concurrent sends' stores (with pacing slots) and sent marks: one statement and one commit per batch. */
  writes: SendWrites;
  /** Provider acceptances still being recorded because the database refused their sent mark, and late answers awaited. */
  accepted: AcceptedSends;
  /** How far the provider's status callbacks have been applied: a send that may have been accepted waits for it. */
  callbacks: CallbackWatermark;
  /** Time a single send spent in each stage of its request (`messaging_send_stage_seconds`). */
  sendStages?: (stage: SendStage, seconds: number) => void;
}

/** The stages of a single send's request, in order. */
export type SendStage = "lookup" | "opt_out" | "contact" | "store" | "pace" | "spacer" | "provider" | "record";

/** Marks the end of each stage of one send and reports how long it took since the previous mark. */
export class StageClock {
  private last = performance.now();
  constructor(private readonly report: (stage: SendStage, seconds: number) => void) {}
  mark(stage: SendStage): void {
    const now = performance.now();
    this.report(stage, (now - this.last) / 1000);
    this.last = now;
  }
}

/**
 * Provider acceptances whose `sent` mark the database refused (a restart, a
 * dropped connection): the provider's answer is kept here and recorded again
 * until the database is back. While a message is here, this process's retry
 * worker never calls the provider for it: a message the provider accepted is
 * not sent again because our own write failed. (Only the death of the process
 * in that window loses the answer; see the README.)
 */
export class AcceptedSends {
  private readonly recording = new Map<string, Promise<void>>();
  /** Late answers of unanswered calls being awaited and recorded (deliver.ts, followLateAnswer). */
  private readonly following = new Set<Promise<void>>();
  /** Set at shutdown: the recording loops give up (the stalled-send sweep of a live replica takes over). */
  stopped = false;

  has(messageId: string): boolean {
    return this.recording.has(messageId);
  }

  get size(): number {
    return this.recording.size;
  }

  keep(messageId: string, recording: Promise<void>): void {
    const tracked = recording.finally(() => this.recording.delete(messageId));
    this.recording.set(messageId, tracked);
  }

  /** A late answer awaited and recorded: shutdown lets it finish like the recordings. */
  follow(work: Promise<void>): void {
    const tracked: Promise<void> = work.finally(() => this.following.delete(tracked));
    this.following.add(tracked);
  }

  /** Shutdown: lets the recordings in progress finish, for at most `timeoutMs`. */
  async drain(timeoutMs: number): Promise<void> {
    this.stopped = true;
    if (this.recording.size === 0 && this.following.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const pending = [...this.recording.values(), ...this.following];
    await Promise.race([Promise.allSettled(pending), new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }
}

/**
 * Contact ids of recently messaged numbers. A contact's id never changes for
 * its (organization, phone) and contacts are never deleted, so a hit saves
 * the send path one bus round trip. Opt-outs are NOT cached: they must be
 * read-your-writes. Bounded; the oldest entries go first.
 */
export class ContactIdCache {
  private readonly map: BoundedMap<string, string>;
  constructor(max = 50_000) {
    this.map = new BoundedMap(max);
  }

  get(organizationId: string, phone: string): string | undefined {
    return this.map.get(`${organizationId}|${phone}`);
  }

  set(organizationId: string, phone: string, contactId: string): void {
    this.map.set(`${organizationId}|${phone}`, contactId);
  }
}

/**
 * Template jobs that stopped sending, by the time they stopped (`bcast.template-jobs.jobs.stopped.v1`): a batch asked
 * for before then does not make its sends still waiting for their slot. Bounded: the oldest are forgotten first (a
 * batch lasts seconds).
 */
export class StoppedJobs {
  private readonly at: BoundedMap<string, number>;
  constructor(max = 10_000) {
    this.at = new BoundedMap(max);
  }
  stop(jobId: string, at: number): void {
    this.at.set(jobId, at);
  }
  /** Whether the job stopped at or after `issuedAt` (the batch's request). */
  stoppedSince(jobId: string, issuedAt: number | undefined): boolean {
    const at = this.at.get(jobId);
    return at !== undefined && issuedAt !== undefined && issuedAt <= at;
  }
}
