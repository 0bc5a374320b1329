import { RPC } from "@platform/contracts";
import { ApiError } from "@platform/http";
import type { Bus } from "@platform/bus";

/** Bus calls to the contacts service. It owns contacts and opt-outs; we never guess its answer. */
const TIMEOUT_MS = 3_000;

/** Whether the phone has an active opt-out on the channel; any failure to know is 503 (fail closed). */
export async function isOptedOut(bus: Bus, organizationId: string, channelId: string, phone: string): Promise<boolean> {
  try {
    const answer = await bus.request(RPC.checkOptOuts, { organizationId, messagingChannelId: channelId, phones: [phone] }, { timeoutMs: TIMEOUT_MS });
    return answer.optedOut.includes(phone);
  } catch {
    throw ApiError.unavailable("The opt-out check is unavailable; nothing was sent; retry later");
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
