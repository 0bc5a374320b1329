import { createHmac } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import type { WebhookBody } from "../src";

export const APP_SECRET = "test-app-secret";
export const TOKEN = "test-token";

export interface ReceivedWebhook {
  raw: Buffer;
  signature: string | undefined;
  body: WebhookBody;
  at: number;
}

/** A stand-in for the gateway's `/provider/webhooks`: records raw bodies, answers `nextStatuses` first, then 200. */
export interface Receiver {
  url: string;
  received: ReceivedWebhook[];
  nextStatuses: number[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const receiver = { received, nextStatuses: [] as number[] } as Omit<Receiver, "url" | "close">;
  const app = express();
  // Raw bytes: the signature covers the exact body, so it must be checked before any parsing.
  app.post("/provider/webhooks", express.raw({ type: "*/*" }), (req, res) => {
    const status = receiver.nextStatuses.shift() ?? 200;
    if (status === 200) {
      const raw = req.body as Buffer;
      received.push({ raw, signature: req.header("x-hub-signature-256"), body: JSON.parse(raw.toString("utf8")) as WebhookBody, at: Date.now() });
    }
    res.sendStatus(status);
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  return {
    ...receiver,
    received,
    get nextStatuses() {
      return receiver.nextStatuses;
    },
    set nextStatuses(v: number[]) {
      receiver.nextStatuses = v;
    },
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/provider/webhooks`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export const expectedSignature = (raw: Buffer, secret = APP_SECRET) =>
  "sha256=" + createHmac("sha256", secret).update(raw).digest("hex");

export async function waitFor<T>(probe: () => T | undefined | false, timeoutMs = 3_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > until) throw new Error("waitFor: timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export function textBody(to: string, callbackData?: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    messaging_product: "whatsapp",
    recipient_type: "individual",
    to,
    type: "text",
    text: { body: "hello" },
  };
  if (callbackData !== undefined) body.biz_opaque_callback_data = callbackData;
  return body;
}

export async function post(url: string, body: unknown, token: string | null = TOKEN): Promise<{ status: number; json: unknown }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await fetch(url, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}
