import { expect } from "chai";
import express from "express";
import net, { type AddressInfo } from "node:net";
import type { Server } from "node:http";
import { classifyResponse, createProviderClient, type ProviderClient } from "../src";

interface Seen {
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: unknown;
}

/** What the fake provider answers next: status and raw body text, optionally after a delay. */
interface Answer {
  status: number;
  body: string;
  delayMs?: number;
}

describe("createProviderClient", () => {
  let server: Server;
  let baseUrl: string;
  let next: Answer;
  const seen: Seen[] = [];
  let client: ProviderClient;

  before(async () => {
    const app = express();
    app.use(express.json());
    app.post("/v21.0/:phoneNumberId/messages", (req, res) => {
      seen.push({ path: req.path, authorization: req.headers.authorization, contentType: req.headers["content-type"], body: req.body });
      const answer = next;
      setTimeout(() => res.status(answer.status).type("application/json").send(answer.body), answer.delayMs ?? 0);
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v21.0`;
    client = createProviderClient({ baseUrl, accessToken: "tok", timeoutMs: 300 });
  });

  after(async () => {
    await client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    seen.length = 0;
    next = { status: 200, body: JSON.stringify({ messaging_product: "whatsapp", messages: [{ id: "wamid.OK" }] }) };
  });

  const error = (status: number, code: number | string, message = "boom"): Answer => ({
    status,
    body: JSON.stringify({ error: { message, type: "OAuthException", code } }),
  });

  it("posts the text body to {baseUrl}/{phoneNumberId}/messages with the bearer token", async () => {
    const result = await client.sendText({ phoneNumberId: "pn_1", to: "+15550001111", text: "hi", callbackData: "msg_1" });
    expect(result).to.deep.equal({ ok: true, providerMessageId: "wamid.OK" });
    expect(seen).to.have.length(1);
    expect(seen[0].path).to.equal("/v21.0/pn_1/messages");
    expect(seen[0].authorization).to.equal("Bearer tok");
    expect(seen[0].contentType).to.match(/^application\/json/);
    expect(seen[0].body).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "15550001111",
      type: "text",
      text: { body: "hi" },
      biz_opaque_callback_data: "msg_1",
    });
  });

  it("posts the template body", async () => {
    const result = await client.sendTemplate({
      phoneNumberId: "pn_2",
      to: "15550001111",
      template: { name: "promo", language: "en_US", headerFormat: null },
      bodyParameters: ["Ana"],
      callbackData: "msg_2",
    });
    expect(result.ok).to.equal(true);
    expect(seen[0].path).to.equal("/v21.0/pn_2/messages");
    expect(seen[0].body).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "15550001111",
      type: "template",
      template: {
        name: "promo",
        language: { policy: "deterministic", code: "en_US" },
        components: [{ type: "body", parameters: [{ type: "text", text: "Ana" }] }],
      },
      biz_opaque_callback_data: "msg_2",
    });
  });

  const send = () => client.sendText({ phoneNumberId: "pn", to: "+15550001111", text: "x", callbackData: "m" });

  it("classifies the throughput error 130429 as transient whatever the status", async () => {
    for (const status of [400, 429, 403]) {
      next = error(status, 130429, "Rate limit hit");
      expect(await send()).to.deep.equal({ ok: false, kind: "transient", code: "130429", title: "Rate limit hit", httpStatus: status });
    }
  });

  it("classifies 5xx as transient", async () => {
    next = error(503, 2, "Service temporarily unavailable");
    expect(await send()).to.deep.equal({ ok: false, kind: "transient", code: "2", title: "Service temporarily unavailable", httpStatus: 503 });
    next = { status: 500, body: "<html>oops</html>" };
    expect(await send()).to.include({ ok: false, kind: "transient", code: "invalid_response", httpStatus: 500 });
  });

  it("classifies other 4xx as permanent", async () => {
    next = error(400, 131026, "Message undeliverable");
    expect(await send()).to.deep.equal({ ok: false, kind: "permanent", code: "131026", title: "Message undeliverable", httpStatus: 400 });
    next = error(401, 190, "Invalid OAuth access token");
    expect(await send()).to.deep.equal({ ok: false, kind: "permanent", code: "190", title: "Invalid OAuth access token", httpStatus: 401 });
  });

  it("classifies an unreadable 2xx as transient, an unreadable 4xx as permanent (408 and 429 without the provider's error body transient)", async () => {
    next = { status: 200, body: "not json" };
    expect(await send()).to.include({ ok: false, kind: "transient", code: "unreadable_success", httpStatus: 200 });
    next = { status: 200, body: JSON.stringify({ messages: [] }) };
    expect(await send()).to.include({ ok: false, kind: "transient", code: "unreadable_success", httpStatus: 200 });
    next = { status: 404, body: "Not Found" };
    expect(await send()).to.include({ ok: false, kind: "permanent", code: "http_404", httpStatus: 404 });
    next = { status: 403, body: "" };
    expect(await send()).to.include({ ok: false, kind: "permanent", code: "http_403", httpStatus: 403 });
    for (const status of [408, 429]) {
      next = { status, body: "<html>later</html>" };
      expect(await send()).to.include({ ok: false, kind: "transient", code: "invalid_response", httpStatus: status });
    }
    // With the provider's error body, its code decides (contract section 4): only 130429 is transient among 4xx.
    expect(classifyResponse(429, JSON.stringify({ error: { message: "slow", code: 4 } }))).to.include({ kind: "permanent", code: "4" });
    expect(classifyResponse(408, JSON.stringify({ error: { message: "timeout", code: 1 } }))).to.include({ kind: "permanent", code: "1" });
  });

  it("classifies a timeout as transient, bounded by timeoutMs", async () => {
    next = { status: 200, body: JSON.stringify({ messages: [{ id: "late" }] }), delayMs: 1_000 };
    const result = await send();
    // The server answers a valid 200 after 1 s: a "timeout" outcome means the client gave up at its own timeoutMs
    // (what it decided), not measured here as a wall-clock gap, which a busy machine stretches.
    expect(result).to.include({ ok: false, kind: "transient", code: "timeout", httpStatus: null });
  });

  it("with lateAnswerMs, a timed-out call's late answer is given as `late`: accepted, refused, or nothing in time", async () => {
    const patient = createProviderClient({ baseUrl, accessToken: "tok", timeoutMs: 100, lateAnswerMs: 5_000 });
    try {
      next = { status: 200, body: JSON.stringify({ messages: [{ id: "wamid.late" }] }), delayMs: 400 };
      const accepted = await patient.sendText({ phoneNumberId: "pn", to: "+1555", text: "x" });
      expect(accepted).to.include({ ok: false, kind: "transient", code: "timeout" });
      expect(await (accepted as { late?: Promise<unknown> }).late).to.deep.equal({ ok: true, providerMessageId: "wamid.late" });

      next = { ...error(400, 131026, "undeliverable"), delayMs: 400 };
      const refused = await patient.sendText({ phoneNumberId: "pn", to: "+1555", text: "x" });
      expect(await (refused as { late?: Promise<unknown> }).late).to.include({ ok: false, kind: "permanent", code: "131026" });

      // Closing the client ends the waits still under way: answered as unanswered, with nothing more to wait for.
      next = { status: 200, body: JSON.stringify({ messages: [{ id: "never" }] }), delayMs: 3_000 };
      const unanswered = await patient.sendText({ phoneNumberId: "pn", to: "+1555", text: "x" });
      const closing = patient.close();
      const late = await (unanswered as { late?: Promise<{ late?: unknown }> }).late;
      expect(late).to.include({ ok: false, code: "timeout" });
      expect(late?.late).to.equal(undefined);
      await closing;
    } finally {
      await patient.close().catch(() => undefined);
    }
  });

  it("a call that timed out waiting for a connection is never sent later (its retry would send the message twice)", async () => {
    // One connection, held by a slow call: the second waits for it past its timeout.
    const single = createProviderClient({ baseUrl, accessToken: "tok", timeoutMs: 300, connections: 1 });
    try {
      next = { status: 200, body: JSON.stringify({ messages: [{ id: "slow" }] }), delayMs: 600 };
      const first = single.sendText({ phoneNumberId: "pn-first", to: "+1555", text: "x" });
      const second = await single.sendText({ phoneNumberId: "pn-second", to: "+1555", text: "x" });
      expect(second).to.include({ ok: false, kind: "transient", code: "timeout" });
      expect(await first).to.include({ ok: false, code: "timeout" });
      // The connection is free again: a third call goes through, and the second never reached the provider.
      next = { status: 200, body: JSON.stringify({ messages: [{ id: "wamid.third" }] }) };
      expect(await single.sendText({ phoneNumberId: "pn-third", to: "+1555", text: "x" })).to.deep.include({ ok: true, providerMessageId: "wamid.third" });
      expect(seen.map((s) => s.path)).to.deep.equal(["/v21.0/pn-first/messages", "/v21.0/pn-third/messages"]);
    } finally {
      await single.close();
    }
  });

  it("a connection lost after the request went out is `connection_lost`; a 2xx whose body was cut off is `unreadable_success`", async () => {
    const raw = net.createServer((socket) => {
      socket.once("data", (chunk: Buffer) => {
        if (chunk.includes("pn-cut")) socket.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"messages\":[{\"id");
        setTimeout(() => socket.destroy(), 20);
      });
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const cut = createProviderClient({ baseUrl: `http://127.0.0.1:${(raw.address() as AddressInfo).port}`, accessToken: "tok", timeoutMs: 5_000 });
    try {
      expect(await cut.sendText({ phoneNumberId: "pn-reset", to: "1555", text: "x" })).to.include({ ok: false, kind: "transient", code: "connection_lost", httpStatus: null });
      expect(await cut.sendText({ phoneNumberId: "pn-cut", to: "1555", text: "x" })).to.include({ ok: false, kind: "transient", code: "unreadable_success", httpStatus: 200 });
    } finally {
      await cut.close();
      await new Promise((resolve) => raw.close(resolve));
    }
  });

  it("classifies a connection error as transient", async () => {
    // A port that was just free: nothing listens there any more.
    const probe = await new Promise<Server>((resolve) => {
      const s = express().listen(0, "127.0.0.1", () => resolve(s));
    });
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const dead = createProviderClient({ baseUrl: `http://127.0.0.1:${port}`, accessToken: "tok", timeoutMs: 1_000 });
    try {
      const result = await dead.sendText({ phoneNumberId: "pn", to: "1555", text: "x" });
      expect(result).to.include({ ok: false, kind: "transient", code: "network_error", httpStatus: null });
    } finally {
      await dead.close();
    }
  });

  it("reuses keep-alive connections under concurrent load", async () => {
    let sockets = 0;
    const onConnection = () => sockets++;
    server.on("connection", onConnection);
    const pooled = createProviderClient({ baseUrl, accessToken: "tok", timeoutMs: 10_000, connections: 16 });
    try {
      const results = await Promise.all(
        Array.from({ length: 1_000 }, () => pooled.sendText({ phoneNumberId: "pn", to: "+1555", text: "x" })),
      );
      expect(results.filter((r) => !r.ok)).to.deep.equal([]);
      expect(sockets).to.be.at.most(16);
    } finally {
      server.off("connection", onConnection);
      await pooled.close();
    }
  });
});

describe("classifyResponse", () => {
  it("reads a string error code", () => {
    expect(classifyResponse(429, JSON.stringify({ error: { message: "slow down", code: "130429" } }))).to.include({ kind: "transient", code: "130429" });
  });
  it("falls back to the HTTP status when the error has no code", () => {
    expect(classifyResponse(400, JSON.stringify({ error: { message: "bad" } }))).to.deep.equal({
      ok: false,
      kind: "permanent",
      code: "http_400",
      title: "bad",
      httpStatus: 400,
    });
  });
});
