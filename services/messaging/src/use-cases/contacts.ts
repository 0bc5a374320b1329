import { CONTACTS_RPC, RPC } from "@platform/contracts";
import { ApiError } from "@platform/http";
import type { Bus } from "@platform/bus";
import { Batcher } from "@platform/runtime";

/** Bus calls to the contacts service. It owns contacts and opt-outs; we never guess its answer. */
const TIMEOUT_MS = 3_000;

/**
 * The opt-out check of the send path. Concurrent checks on one channel are
 * coalesced (`Batcher`): the first goes out at once; those arriving while it
 * is in flight go together in the next request (the contacts service answers
 * a batch with one query). Every request is sent after its callers arrived,
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
    }, 1_000);
  }

  async isOptedOut(organizationId: string, channelId: string, phone: string): Promise<boolean> {
    try {
      return await this.batcher.submit(`${organizationId}|${channelId}`, phone);
    } catch {
      throw ApiError.unavailable("The opt-out check is unavailable; nothing was sent; retry later");
    }
  }
}

/** The contact of a phone, created when new; name and waId update it. Throws the bus error (callers decide 503 or retry). */
export async function resolveContact(
  bus: Bus,
  input: { organizationId: string; phone: string; name?: string; waId?: string },
): Promise<string> {
  const answer = await bus.request(RPC.resolveContact, input, { timeoutMs: TIMEOUT_MS });
  return answer.contactId;
}

/**
 * The contacts of many E.164 phones in one request (an inbound batch), with
 * each one's name and waId when known (null otherwise); phone → contact id.
 * Throws the bus error (the caller's batch is redelivered).
 */
export async function resolveContacts(
  bus: Bus,
  input: { organizationId: string; phones: string[]; names: Array<string | null>; waIds: Array<string | null> },
): Promise<Map<string, string>> {
  const answer = await bus.request(CONTACTS_RPC.resolveContacts, input, { timeoutMs: TIMEOUT_MS });
  return new Map(input.phones.map((p, k) => [p, answer.contactIds[k]]));
}
