import { CONTACTS_RPC, RPC, type InboundForKeywords } from "@platform/contracts";
import { ApiError } from "@platform/http";
import type { Bus } from "@platform/bus";
import { Batcher } from "@platform/runtime";

/** Bus calls to the contacts service. It owns contacts and opt-outs; we never guess its answer. */
const TIMEOUT_MS = 3_000;

/** Opt-out check requests in flight per channel at once (see OptOutChecker). */
export const OPT_OUT_CHECKS_IN_FLIGHT = 2;

/**
 * The opt-out check of the send path. Concurrent checks on one channel are
 * coalesced (`Batcher`): the first goes out at once; those arriving while it
 * is in flight go together in a second request at once, and those arriving
 * while two are in flight together in the next (the contacts service answers
 * a batch with one query). Two in flight per channel, not one: with a single
 * lane a send waited for the request before its own as well, and a busy
 * channel's sends (the common case: one business number) queued behind
 * one another (one channel measured half the throughput of two at the same
 * concurrency). Every request is sent after its callers arrived,
 * so an opt-out committed before a send was received is always seen
 * (read-your-writes). Any failure to get an answer is 503, never a guess.
 */
export class OptOutChecker {
  private readonly batcher: Batcher<string, boolean>;

  constructor(bus: Bus) {
    this.batcher = new Batcher(async (key, phones) => {
      const [organizationId, messagingChannelId] = key.split("|");
      const answer = await bus.request(RPC.checkOptOuts, { organizationId, messagingChannelId, phones: [...new Set(phones)] }, { timeoutMs: TIMEOUT_MS });
      const optedOut = new Set(answer.optedOut);
      return phones.map((p) => optedOut.has(p));
    }, 1_000, OPT_OUT_CHECKS_IN_FLIGHT);
  }

  async isOptedOut(organizationId: string, channelId: string, phone: string): Promise<boolean> {
    try {
      return await this.batcher.submit(`${organizationId}|${channelId}`, phone);
    } catch {
      throw ApiError.unavailable("The opt-out check is unavailable; nothing was sent; retry later");
    }
  }
}

/**
 * The send path's contact resolution (a phone this replica has no cached id
 * for: its first send). Concurrent first sends of an organization go in ONE
 * `rpc.contacts.resolve-many.v1` request (`Batcher`, two in flight) instead of
 * one `rpc.contacts.resolve.v1` request each: a burst of sends to new numbers
 * (a campaign's first minute, a restarted replica) paid a round trip to the
 * contacts service per number. Same rule as a single resolve without a name:
 * the contact is created when new, an existing one is left as it is.
 * Throws the bus error (the caller answers 503).
 */
export class ContactResolver {
  private readonly batcher: Batcher<string, string>;

  constructor(bus: Bus) {
    this.batcher = new Batcher(async (organizationId, phones) => {
      const unique = [...new Set(phones)];
      const answer = await bus.request(CONTACTS_RPC.resolveContacts, { organizationId, phones: unique }, { timeoutMs: TIMEOUT_MS });
      const ids = new Map(unique.map((p, k) => [p, answer.contactIds[k]]));
      return phones.map((p) => ids.get(p)!);
    }, 1_000, 2);
  }

  /** Requests made so far (for tests and metrics). */
  get requests(): number {
    return this.batcher.batches;
  }

  resolve(organizationId: string, phone: string): Promise<string> {
    return this.batcher.submit(organizationId, phone);
  }
}

type ResolveInput = {
  organizationId: string;
  phones: string[];
  names: Array<string | null>;
  waIds: Array<string | null>;
  /** The batch's new inbound messages, for keyword opt-outs (ADR 0014). */
  inbound?: InboundForKeywords[];
};

/** One grouping resolver per bus (the bus is per process). */
/** Each batch's ids, or the error of its own request. */
const resolvers = new WeakMap<Bus, Batcher<ResolveInput, string[] | { failed: unknown }>>();

/** Phones of one request at most (the contract allows 10,000; provider batches carry up to 10 each). */
const MAX_GROUPED_PHONES = 5_000;

/**
 * The contacts of many E.164 phones (an inbound batch), with each one's name
 * and waId when known (null otherwise); phone → contact id. The batches of
 * one organization resolved concurrently go in one request (`Batcher`: those
 * of one event-loop turn, then those arriving while a request is in flight),
 * their phones in arrival order, so a later batch's name of a number is kept
 * as if they had gone one after the other. The keyword opt-outs of their
 * inbound messages are applied by contacts before it answers. If a grouped request fails, each
 * batch is asked alone, so one batch's failure never fails the others.
 * Throws the bus error (the caller's batch is redelivered).
 */
export async function resolveContacts(bus: Bus, input: ResolveInput): Promise<Map<string, string>> {
  let resolver = resolvers.get(bus);
  if (!resolver) {
    const ask = async (items: ResolveInput[]): Promise<string[][]> => {
      const inbound = items.flatMap((i) => i.inbound ?? []);
      const answer = await bus.request(
        CONTACTS_RPC.resolveContacts,
        {
          organizationId: items[0].organizationId,
          phones: items.flatMap((i) => i.phones),
          names: items.flatMap((i) => i.names),
          waIds: items.flatMap((i) => i.waIds),
          ...(inbound.length ? { inbound } : {}),
        },
        { timeoutMs: TIMEOUT_MS },
      );
      let offset = 0;
      return items.map((i) => answer.contactIds.slice(offset, (offset += i.phones.length)));
    };
    resolver = new Batcher<ResolveInput, string[] | { failed: unknown }>(async (_organizationId, items) => {
      const groups: ResolveInput[][] = [];
      let size = Infinity;
      for (const item of items) {
        if (size + item.phones.length > MAX_GROUPED_PHONES) groups.push([]), (size = 0);
        groups[groups.length - 1].push(item);
        size += item.phones.length;
      }
      const out: Array<string[] | { failed: unknown }> = [];
      for (const group of groups) {
        try {
          out.push(...(await ask(group)));
        } catch (err) {
          if (group.length === 1) {
            out.push({ failed: err });
            continue;
          }
          // Alone: a batch that fails again fails only its own caller.
          out.push(...(await Promise.all(group.map((item) => ask([item]).then(([ids]) => ids, (e: unknown) => ({ failed: e }))))));
        }
      }
      return out;
    }, 100);
    resolvers.set(bus, resolver);
  }
  const ids = await resolver.submit(input.organizationId, input);
  if (!Array.isArray(ids)) throw ids.failed;
  return new Map(input.phones.map((p, k) => [p, ids[k]]));
}
