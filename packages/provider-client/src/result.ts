import { z } from "zod";

/** The provider accepted the message. */
export interface ProviderSuccess {
  ok: true;
  providerMessageId: string;
}

/**
 * The provider (or the path to it) did not accept the message. `transient`
 * means a retry with backoff can help; `permanent` means it cannot and the
 * message should be marked failed.
 */
export interface ProviderFailure {
  ok: false;
  kind: "transient" | "permanent";
  /** The provider's error code (e.g. `"130429"`), or `timeout`, `connection_lost`, `network_error`, `invalid_response`, `unreadable_success`. */
  code: string;
  title: string;
  /** null when no HTTP answer arrived (timeout, connection error). */
  httpStatus: number | null;
  /**
   * A `timeout` of a call that was sent, with the client's `lateAnswerMs`: the call's answer after all (`timeout`
   * again, without `late`, when none came in time).
   */
  late?: Promise<ProviderResult>;
}

export type ProviderResult = ProviderSuccess | ProviderFailure;

/** The provider's throughput error: transient whatever HTTP status carries it. */
export const THROUGHPUT_ERROR_CODE = "130429";

const SuccessAnswer = z.object({ messages: z.array(z.object({ id: z.string().min(1) })).min(1) });
const ErrorAnswer = z.object({
  error: z.object({
    message: z.string().optional(),
    type: z.string().optional(),
    code: z.union([z.number(), z.string()]).optional(),
    error_user_title: z.string().optional(),
  }),
});

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The code of a 2xx answer without a readable message id. The provider most likely accepted the message, so it is
 * retried only after its status callback (which carries our message id) had time to settle it, as after a timeout.
 */
export const UNREADABLE_SUCCESS_CODE = "unreadable_success";

/**
 * The code of a call whose request went out on a connection that then ended before any answer (reset, closed). The
 * provider may have taken the message: like a timeout, it is retried only after its status callback had time to
 * settle it. A call that never had a connection (refused, unreachable) is `network_error`: never sent.
 */
export const CONNECTION_LOST_CODE = "connection_lost";

/** HTTP statuses that mean "not now" rather than "never": transient even without the provider's error body. */
const TRANSIENT_HTTP = new Set([408, 429]);

/**
 * Classifies one HTTP answer of the provider (contract section 4): the
 * provider's error code first, because it sends its throughput error (130429)
 * with varying HTTP statuses; then any 5xx is transient and any other 4xx is
 * permanent, whether or not its body is the provider's error shape (a 4xx
 * from a proxy in front of it, say, with an HTML body: code `http_<status>`).
 * Only without the provider's error body do 408 and 429 say "later"; with it,
 * its code decides ("classified by the provider's error code, not its HTTP
 * status": a 429 whose code is not 130429 is permanent). A 2xx without a message id
 * (UNREADABLE_SUCCESS_CODE), or an unexpected 1xx/3xx, is transient: we do not know what happened, and giving up
 * would lose a message the provider may accept on retry.
 */
export function classifyResponse(httpStatus: number, bodyText: string): ProviderResult {
  const json = parseJson(bodyText);
  if (httpStatus >= 200 && httpStatus < 300) {
    const ok = SuccessAnswer.safeParse(json);
    if (ok.success) return { ok: true, providerMessageId: ok.data.messages[0].id };
    return { ok: false, kind: "transient", code: UNREADABLE_SUCCESS_CODE, title: "provider answered 2xx without a message id", httpStatus };
  }

  const err = ErrorAnswer.safeParse(json);
  const clientError = httpStatus >= 400 && httpStatus < 500 && !TRANSIENT_HTTP.has(httpStatus);
  if (!err.success) {
    if (clientError) return { ok: false, kind: "permanent", code: `http_${httpStatus}`, title: `provider answered HTTP ${httpStatus}`, httpStatus };
    return {
      ok: false,
      kind: "transient",
      code: "invalid_response",
      title: `provider answered HTTP ${httpStatus} with an unreadable body`,
      httpStatus,
    };
  }
  const code = err.data.error.code !== undefined ? String(err.data.error.code) : `http_${httpStatus}`;
  const title = err.data.error.message ?? err.data.error.error_user_title ?? `HTTP ${httpStatus}`;
  const transient = code === THROUGHPUT_ERROR_CODE || !(httpStatus >= 400 && httpStatus < 500);
  return { ok: false, kind: transient ? "transient" : "permanent", code, title, httpStatus };
}
