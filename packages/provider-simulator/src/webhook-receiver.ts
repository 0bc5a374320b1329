import { timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { signBody } from "./webhook-sender";

export interface SignedWebhookReceiver {
  /** Where the simulator should POST its webhooks (`.../provider/webhooks`). */
  url: string;
  close(): Promise<void>;
}

/**
 * The receiving side of the provider's webhooks, for tests that run a service without the gateway: checks
 * `X-Hub-Signature-256` against `appSecret` (401 when it does not match), hands the raw body to `accept`, and
 * answers 200 once `accept` resolves or 503 when it throws — so the simulator retries as it would against the
 * gateway. Messaging's and template-jobs' harnesses store the body on `provider.inbound.v1` from `accept`,
 * exactly as the gateway does.
 */
export async function startSignedWebhookReceiver(appSecret: string, accept: (rawBody: string) => Promise<void>): Promise<SignedWebhookReceiver> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const expected = Buffer.from(signBody(raw, appSecret));
      const given = Buffer.from(String(req.headers["x-hub-signature-256"] ?? ""));
      if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
        res.writeHead(401).end();
        return;
      }
      accept(raw.toString("utf8")).then(
        () => res.writeHead(200).end(),
        () => res.writeHead(503).end(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/provider/webhooks`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
