import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, request } from "undici";

/** `sha256=<lowercase hex HMAC-SHA256 of the raw body>`, the provider's signature header value. */
export function signBody(rawBody: Buffer | string, appSecret: string): string {
  return "sha256=" + createHmac("sha256", appSecret).update(rawBody).digest("hex");
}

export interface SendResult {
  /** The last HTTP status, or null when no answer ever arrived. */
  status: number | null;
  delivered: boolean;
  attempts: number;
}

/**
 * Posts webhook bodies to the gateway over keep-alive sockets, signing each.
 * Retries cover the gateway starting after the simulator, or restarting.
 */
export class WebhookSender {
  private readonly agent = new Agent({ keepAliveTimeout: 10_000, connections: 16 });
  private readonly closing = new AbortController();

  constructor(
    private readonly appSecret: string,
    private readonly retries: number,
    private readonly timeoutMs = 10_000,
  ) {}

  /** One POST, no retry. `signature` undefined signs correctly; null sends no signature header. */
  async postOnce(url: string, rawBody: Buffer, signature?: string | null): Promise<number | null> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    const sig = signature === undefined ? signBody(rawBody, this.appSecret) : signature;
    if (sig !== null) headers["x-hub-signature-256"] = sig;
    try {
      const res = await request(url, {
        method: "POST",
        headers,
        body: rawBody,
        dispatcher: this.agent,
        signal: AbortSignal.any([this.closing.signal, AbortSignal.timeout(this.timeoutMs)]),
      });
      await res.body.dump();
      return res.statusCode;
    } catch {
      return null;
    }
  }

  /**
   * Signs and posts, retrying with exponential backoff (100 ms doubling, at
   * most 2 s) on no answer, 5xx, 408 and 429. Other 4xx are final: the
   * gateway read the body and refused it, and the same bytes would be refused
   * again.
   */
  async send(url: string, body: unknown): Promise<SendResult> {
    const raw = Buffer.from(JSON.stringify(body));
    const signature = signBody(raw, this.appSecret);
    let status: number | null = null;
    for (let attempt = 1; ; attempt++) {
      status = await this.postOnce(url, raw, signature);
      if (status !== null && status >= 200 && status < 300) return { status, delivered: true, attempts: attempt };
      const retryable = status === null || status >= 500 || status === 408 || status === 429;
      if (!retryable || attempt > this.retries || this.closing.signal.aborted) {
        return { status, delivered: false, attempts: attempt };
      }
      try {
        await sleep(Math.min(100 * 2 ** (attempt - 1), 2_000), undefined, { signal: this.closing.signal });
      } catch {
        return { status, delivered: false, attempts: attempt };
      }
    }
  }

  /** Aborts in-flight posts and backoff waits, then closes the sockets. */
  async close(): Promise<void> {
    this.closing.abort();
    await this.agent.close();
  }
}
