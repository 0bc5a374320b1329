import { OPTED_OUT_FAILURE_CODE, type TemplateSendOutcome } from "@platform/contracts";
import type { FinalState } from "../db/repositories/jobs.repository";

/**
 * The recipient state of a send's final outcome in messaging. Stopped by an opt-out set while it waited for its slot
 * there: never sent, so skipped (contract). Stopped by the job's cancel before it reached the provider: `cancelled`,
 * uncounted.
 */
export function finalStateOf(outcome: Exclude<TemplateSendOutcome["outcome"], "pending">, errorCode: string | null): FinalState {
  if (outcome === "sent" || outcome === "cancelled") return outcome;
  return outcome === "opted_out" || errorCode === OPTED_OUT_FAILURE_CODE ? "skipped" : "failed";
}
