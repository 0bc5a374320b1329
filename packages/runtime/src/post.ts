/**
 * One HTTP POST on an undici dispatcher (a Pool, an Agent), answered without a body stream.
 *
 * `undici.request` wraps every call in a Readable body, an AsyncResource and, with a signal, an abort listener; read
 * with `for await` or `.text()`, that is several promises per call, and each promise costs more while an
 * AsyncLocalStorage is active (promise hooks), as it is in every service. This path dispatches with a handler of its
 * own that collects the answer's bytes: 30 to 40 % less client CPU per call on this VM (bench/RESULTS.md, "HTTP
 * calls without a body stream"). Redirects are never followed (undici's core does not), as both callers require.
 */
import type { Dispatcher } from "undici";

export interface PostOptions {
  /** One timer bounds the whole call: waiting for a connection, connecting, the headers and the body. None by default. */
  timeoutMs?: number;
  /** Stop reading the answer's body after this many bytes (the connection is then closed, not reused). */
  readLimit?: number;
  /**
   * A call already sent when `timeoutMs` ran out is not ended then: its answer is still read for this much longer and
   * given by `late` (a provider that took a message and answered late has it, and its answer says so). A call still
   * waiting for a connection is ended at `timeoutMs` as without it: it was never sent.
   */
  lateMs?: number;
}

/**
 * What came back. `status` is null when no answer came (`error` says why); `body` is null when an answer came but its
 * body could not be read to its end or to `readLimit` (then `error` says why).
 */
export interface PostAnswer {
  status: number | null;
  body: Buffer | null;
  error: Error | null;
  /** The call was ended by `timeoutMs`. */
  timedOut: boolean;
  /** The request had a connection and went out on it (whole or in part): the server may have it, answered or not. */
  sent: boolean;
  /**
   * With `lateMs`, a call that timed out after it was sent: what came back within `lateMs` more (`timedOut` again
   * when nothing did). `endLate` ends the wait at once (answered as a timeout), e.g. when the process stops.
   */
  late?: Promise<PostAnswer>;
  endLate?: () => void;
}

export class PostTimeoutError extends Error {
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = "PostTimeoutError";
  }
}

export function post(
  dispatcher: Dispatcher,
  target: { origin: string; path: string },
  headers: Record<string, string>,
  body: string | Buffer,
  opts: PostOptions = {},
): Promise<PostAnswer> {
  return new Promise<PostAnswer>((resolve) => {
    /** Who gets the call's outcome: the caller; after a timeout with `lateMs`, the late answer; nobody once given. */
    let receiver: ((answer: PostAnswer) => void) | undefined = resolve;
    let controller: Dispatcher.DispatchController | undefined;
    let status: number | null = null;
    const chunks: Buffer[] = [];
    let size = 0;
    let timer: NodeJS.Timeout | undefined;
    const give = (answer: Omit<PostAnswer, "sent">): void => {
      const to = receiver;
      receiver = undefined;
      if (timer) clearTimeout(timer);
      to?.({ ...answer, sent: controller !== undefined });
    };
    const settle = (answer: Omit<PostAnswer, "timedOut" | "sent">): void => give({ ...answer, timedOut: false });
    const answered = (): void => settle({ status, body: Buffer.concat(chunks, size), error: null });
    /** Ends the call as unanswered after `ms`. Not yet on a socket (waiting for one): ended when it gets there, in onRequestStart. */
    const timeOut = (ms: number): void => {
      const error = new PostTimeoutError(ms);
      give({ status, body: null, error, timedOut: true });
      controller?.abort(error);
    };
    if (opts.timeoutMs !== undefined) {
      const timeoutMs = opts.timeoutMs;
      timer = setTimeout(() => {
        timer = undefined;
        const lateMs = opts.lateMs ?? 0;
        if (lateMs <= 0 || !controller || !receiver) return timeOut(timeoutMs);
        // Sent and not answered yet: the caller is told now, and the answer is still read for `lateMs` more.
        const caller = receiver;
        const late = new Promise<PostAnswer>((resolveLate) => (receiver = resolveLate));
        const endLate = (): void => timeOut(timeoutMs + lateMs);
        timer = setTimeout(endLate, lateMs);
        caller({ status, body: null, error: new PostTimeoutError(timeoutMs), timedOut: true, sent: true, late, endLate });
      }, timeoutMs);
    }
    const readLimit = opts.readLimit ?? Infinity;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (!receiver) c.abort(new Error("call already ended"));
      },
      onResponseStart(_c, statusCode) {
        status = statusCode;
      },
      onResponseData(c, chunk) {
        if (!receiver) return;
        chunks.push(chunk);
        size += chunk.length;
        if (size >= readLimit) {
          answered();
          c.abort(new Error("read limit reached"));
        }
      },
      onResponseEnd() {
        answered();
      },
      onResponseError(_c, error) {
        settle({ status, body: null, error });
      },
    };
    try {
      dispatcher.dispatch({ origin: target.origin, path: target.path, method: "POST", headers, body }, handler);
    } catch (error) {
      settle({ status: null, body: null, error: error as Error });
    }
  });
}

/** A few URLs take almost every call (the provider's, each webhook's): each is parsed once, as `undici.request` would. */
const targets = new Map<string, { origin: string; path: string }>();
export function postTarget(url: string): { origin: string; path: string } {
  let target = targets.get(url);
  if (!target) {
    const u = new URL(url);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new TypeError(`unsupported protocol ${u.protocol}`);
    target = { origin: u.origin, path: u.search ? `${u.pathname}${u.search}` : u.pathname };
    if (targets.size >= 1024) targets.clear();
    targets.set(url, target);
  }
  return target;
}
