/** A failure a later attempt may fix (a dependency down, a provider throttling): the message is redelivered. */
export class RetryableError extends Error {
  constructor(message: string, readonly delayMs?: number) {
    super(message);
    this.name = "RetryableError";
  }
}

/** A failure no retry can fix (a malformed payload): the message is dead-lettered at once. */
export class PermanentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PermanentError";
  }
}

/** A request/reply answer carrying an error of the responder; `retryable` says whether asking again can help. */
export class RpcCallError extends Error {
  constructor(readonly code: string, message: string, readonly retryable: boolean) {
    super(message);
    this.name = "RpcCallError";
  }
}

/** Nobody answered in time (no responders, timeout, connection down): always retryable. */
export class BusUnavailableError extends RetryableError {
  constructor(message: string) {
    super(message);
    this.name = "BusUnavailableError";
  }
}
