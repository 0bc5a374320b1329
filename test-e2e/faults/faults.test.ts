import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { expect } from "chai";
import { Client } from "pg";
import { startSimulator, type Simulator } from "@platform/provider-simulator";
import { freePort, REPO_ROOT, startStack, type Stack } from "@platform/stack";
import { eventually } from "@platform/testing";
import { PrivateNats, PrivatePostgres } from "./private-services";
import { startReceiverProcess, type Hook, type ReceiverProcess } from "./receiver-process";

/**
 * The fault suite (`npm run test:faults`): the whole stack on a Postgres and
 * a NATS of its own, under a steady load of sends (50/s), inbound messages
 * (20/s) and the status callbacks they cause, while each dependency and
 * service is broken in turn. After recovery it checks the records of the
 * simulator and the webhook receiver: no accepted message lost, none sent
 * twice, every event delivered at least once with duplicates sharing
 * `data.id`. It writes docs/reliability.md.
 */
interface FaultRecord {
  fault: string;
  injected: string;
  readyAfterS: number;
  retried: string;
}

const SENDS_PER_S = 50;
const INBOUND_PER_S = 20;
const CONTACTS = 40;
/** A bulk template job runs through every fault: throttled to 100,000/h (about 28/s), it lasts about as long as the faults. */
const JOB_RECIPIENTS = 2_000;

describe("faults: the stack under load while each part is broken in turn", function () {
  this.timeout(15 * 60_000);
  let pg: PrivatePostgres;
  let nats: PrivateNats;
  let sim: Simulator;
  let stack: Stack;
  /** The integrator's endpoint, in a process of its own (see receiver-process.ts). */
  let receiver: ReceiverProcess | undefined;
  let hanging: http.Server;
  const logs: string[] = [];
  /** A second integrator endpoint, subscribed to the same events, that stops answering during its fault. */
  let hang = false;
  let hangingGot = 0;
  const hung: http.ServerResponse[] = [];
  /** Stops the test's load loop: called by `after` too, so a failed fault step does not leave it sending forever. */
  let stopLoad = () => {};

  before(async () => {
    [pg, nats] = await Promise.all([PrivatePostgres.start(), PrivateNats.start()]);
    const port = await freePort();
    // The provider retries its webhooks for as long as the real one does (here: about two minutes).
    sim = await startSimulator({ webhookUrl: `http://127.0.0.1:${port}/provider/webhooks`, webhookRetries: 60, maxRecordedRequests: 1_000_000 });
    receiver = await startReceiverProcess();
    hanging = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (hang) {
          hung.push(res);
          return;
        }
        hangingGot++;
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
    stack = await startStack({
      port,
      databaseUrl: pg.url,
      natsUrl: nats.url,
      env: {
        LOG_LEVEL: "warn",
        PROVIDER_BASE_URL: sim.url,
        WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
        WEBHOOK_RETRY_DELAYS_MS: "1000,3000,10000",
        WEBHOOK_TIMEOUT_MS: "2000",
        PROVIDER_TIMEOUT_MS: "3000",
      },
      onLog: (line) => {
        logs.push(line);
        if (process.env.FAULTS_VERBOSE) process.stdout.write(line + "\n");
      },
    });
    await stack.waitReady(120_000);
  });

  after(async () => {
    stopLoad();
    for (const res of hung) res.destroy();
    await stack?.stop();
    await sim?.close();
    receiver?.stop();
    await new Promise<void>((resolve) => (hanging ? hanging.close(() => resolve()) : resolve()));
    await Promise.allSettled([pg?.stop(), nats?.stop()]);
  });

  const call = async (method: string, p: string, token: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(stack.url + p, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed };
  };

  it("loses nothing, sends nothing twice and delivers every event, through every fault", async () => {
    const admin = stack.adminToken;
    const org = await call("POST", "/admin/v1/organizations", admin, { name: "Faults", rateLimit: { perSecond: 10_000, burst: 10_000 } });
    expect(org.status).to.equal(201);
    const key = (await call("POST", `/admin/v1/organizations/${org.body.id}/api-keys`, admin, { name: "load" })).body.key as string;
    const phoneNumberId = `pnfault${randomBytes(4).toString("hex")}`;
    const channel = await call("POST", `/admin/v1/organizations/${org.body.id}/channels`, admin, {
      name: "Main",
      phoneNumber: "+15550100000",
      providerPhoneNumberId: phoneNumberId,
      messagesPerSecond: 200,
    });
    expect(channel.status).to.equal(201);
    const hookUrl = `${receiver!.url}/hooks`;
    const webhook = await call("POST", `/admin/v1/organizations/${org.body.id}/webhooks`, admin, {
      url: hookUrl,
      events: ["message.received", "message.sent", "message.delivered", "message.read", "message.failed"],
    });
    expect(webhook.status).to.equal(201);
    const hangingHook = await call("POST", `/admin/v1/organizations/${org.body.id}/webhooks`, admin, {
      url: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/hooks`,
      events: ["message.received", "message.sent", "message.delivered", "message.read", "message.failed"],
    });
    expect(hangingHook.status).to.equal(201);
    const phones = Array.from({ length: CONTACTS }, (_, i) => `+1555020${String(i).padStart(4, "0")}`);
    // Each contact writes in first: the 24-hour window is open for the sends.
    const inboundIds: string[] = [];
    for (const phone of phones) inboundIds.push(await sim.injectInbound({ phoneNumberId, from: phone.slice(1), text: "hi" }));
    await eventually(async () => (await receiver!.hooks()).filter((h) => h.event === "message.received").length >= CONTACTS, 60_000);

    // ---- a bulk template job running through the faults -------------------------------------------
    const template = await call("POST", `/admin/v1/organizations/${org.body.id}/templates`, admin, {
      name: "faults_notice", language: "en_US", status: "approved", bodyParameterCount: 1,
      providerTemplateId: String(9_000_000 + Math.floor(Math.random() * 1e9)), templateAccountId: "waba_faults",
    });
    expect(template.status).to.equal(201);
    const jobPhones = Array.from({ length: JOB_RECIPIENTS }, (_, i) => `+1555030${String(i).padStart(4, "0")}`);
    const job = await call("POST", "/api/v1/templates/send", key, {
      templateId: template.body.id,
      messagingChannelId: channel.body.id,
      throttlePerHour: 100_000,
      recipients: jobPhones.map((phone, i) => ({ phone, bodyParameters: [`r${i}`] })),
    });
    expect(job.status, JSON.stringify(job.body)).to.equal(200);

    // ---- the steady load ---------------------------------------------------------------------------
    const accepted = new Set<string>();
    const refused: string[] = [];
    const transient = { sends: 0, inbound: 0 };
    let running = true;
    stopLoad = () => (running = false);
    let n = 0;
    const sendOne = async (i: number) => {
      // An integrator's client: the same Idempotency-Key on every retry, until an answer that is neither 5xx, 429 nor
      // 409 in-use. A 429 is the contract's "wait and retry with exponential backoff": besides the organization's own
      // bucket, the gateway answers it when the organization holds its share of a slow service's places (ADR 0015),
      // which a fault on a loaded machine can reach.
      const idem = `load-${i}`;
      const body = { to: phones[i % CONTACTS], text: `message ${i}` };
      for (let attempt = 0; attempt < 120; attempt++) {
        try {
          const res = await call("POST", "/api/v1/messages", key, body, { "Idempotency-Key": idem });
          if (res.status === 200) {
            accepted.add(res.body.id);
            return;
          }
          // 409 IDEMPOTENCY_KEY_IN_USE: the first try is still being processed; ask again later, as the contract says.
          if (res.status < 500 && res.status !== 429 && !(res.status === 409 && res.body?.error?.code === "IDEMPOTENCY_KEY_IN_USE")) {
            refused.push(`${res.status} ${JSON.stringify(res.body)}`);
            return;
          }
        } catch {
          /* connection refused or reset while the gateway restarts */
        }
        transient.sends++;
        await new Promise((r) => setTimeout(r, 500));
      }
      refused.push(`send ${i} never answered`);
    };
    const inboundOne = async () => {
      try {
        inboundIds.push(await sim.injectInbound({ phoneNumberId, from: phones[Math.floor(Math.random() * CONTACTS)].slice(1), text: "more" }));
      } catch {
        transient.inbound++;
      }
    };
    const inflight = new Set<Promise<void>>();
    const track = (p: Promise<void>) => {
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
    };
    const loop = (async () => {
      const started = Date.now();
      let sends = 0;
      let inbound = 0;
      while (running) {
        const elapsed = (Date.now() - started) / 1000;
        while (sends < elapsed * SENDS_PER_S) track(sendOne(n++)), sends++;
        while (inbound < elapsed * INBOUND_PER_S) track(inboundOne()), inbound++;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    // ---- the faults --------------------------------------------------------------------------------
    const report: FaultRecord[] = [];
    const probeSend = async () => {
      const res = await call("POST", "/api/v1/messages", key, { to: phones[0], text: "probe" }).catch(() => ({ status: 0, body: null }));
      if (res.status === 200) accepted.add(res.body.id);
      return res.status === 200;
    };
    const untilReady = async (since: number) => {
      await eventually(async () => {
        const ready = await fetch(`${stack.url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status === 200).catch(() => false);
        return ready && (await probeSend());
      }, 120_000);
      return Math.round((Date.now() - since) / 100) / 10;
    };
    const fault = async (name: string, injected: string, inject: () => Promise<void>, heal: () => Promise<void> = async () => {}) => {
      const before = { ...transient, sim: sim.requests.filter((r) => r.responseStatus !== 200).length };
      const t0 = Date.now();
      await inject();
      await heal();
      const readyAfterS = await untilReady(t0);
      // Let the load run on a healthy stack for a while between faults.
      await new Promise((r) => setTimeout(r, 3_000));
      const retried = [
        `${transient.sends - before.sends} send retries by the client`,
        `${transient.inbound - before.inbound} inbound batches given up by the provider`,
        `${sim.requests.filter((r) => r.responseStatus !== 200).length - before.sim} provider calls refused (retried by messaging)`,
      ].join("; ");
      report.push({ fault: name, injected, readyAfterS, retried });
    };

    await new Promise((r) => setTimeout(r, 3_000));
    for (const name of stack.names().filter((x) => x !== "provider-simulator")) {
      await fault(`kill -9 ${name}`, `SIGKILL to the ${name} process; the supervisor restarts it`, async () => stack.kill(name, "SIGKILL"));
    }
    await fault("NATS restart", "nats-server killed (SIGKILL) and started again on the same store", () => nats.restart());
    await fault("Postgres restart", "PostgreSQL stopped in `immediate` mode (as a crash) and started again", () => pg.restart());
    await fault(
      "provider 5xx",
      "the provider answers 500 to every send for 10 s",
      async () => sim.setMode({ kind: "error", httpStatus: 500, code: 2, message: "Service temporarily unavailable" }),
      async () => {
        await new Promise((r) => setTimeout(r, 10_000));
        sim.setMode({ kind: "ok" });
      },
    );
    await fault(
      "provider 130429",
      "the provider answers 130429 (throughput) to every send for 10 s",
      async () => sim.setMode({ kind: "error", httpStatus: 400, code: 130429, message: "Rate limit hit" }),
      async () => {
        await new Promise((r) => setTimeout(r, 10_000));
        sim.setMode({ kind: "ok" });
      },
    );
    await fault(
      "webhook receiver hangs",
      "a second integrator endpoint accepts connections and never answers for 10 s (the first must not wait for it)",
      async () => {
        hang = true;
      },
      async () => {
        await new Promise((r) => setTimeout(r, 10_000));
        hang = false;
        for (const res of hung.splice(0)) res.destroy();
      },
    );

    running = false;
    await loop;
    await Promise.all([...inflight]);

    // ---- the checks --------------------------------------------------------------------------------
    expect(refused, "sends refused with a 4xx or never answered").to.deep.equal([]);
    const ids = [...accepted];
    const providerAccepted = () => {
      const counts = new Map<string, number>();
      for (const r of sim.requests) {
        const id = (r.body as { biz_opaque_callback_data?: string } | undefined)?.biz_opaque_callback_data;
        if (id && r.responseStatus === 200) counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      return counts;
    };
    // Every accepted message reaches the provider once (messaging's background retries finish the stragglers).
    await eventually(() => {
      const counts = providerAccepted();
      return ids.every((id) => (counts.get(id) ?? 0) >= 1);
    }, 180_000, 500).catch(() => undefined);
    const counts = providerAccepted();
    const lost = ids.filter((id) => (counts.get(id) ?? 0) === 0);
    const twice = ids.filter((id) => (counts.get(id) ?? 0) > 1);
    // One logical send (one Idempotency-Key, one text) is one message: a client's retry never makes a second one.
    const perText = new Map<string, number>();
    for (const r of sim.requests) {
      const text = (r.body as { text?: { body?: string } } | undefined)?.text?.body;
      if (text?.startsWith("message ") && r.responseStatus === 200) perText.set(text, (perText.get(text) ?? 0) + 1);
    }
    const logicalTwice = [...perText].filter(([, c]) => c > 1).map(([t]) => t);
    // Every event reaches the integrator at least once.
    const missing = async () => {
      const hooks = await receiver!.hooks();
      const sent = new Set(hooks.filter((h) => h.event === "message.sent").map((h) => h.data.messageId as string));
      const received = new Set(hooks.filter((h) => h.event === "message.received").map((h) => h.data.providerMessageId as string));
      return { sent: ids.filter((id) => !sent.has(id)), received: inboundIds.filter((w) => !received.has(w)) };
    };
    await eventually(async () => {
      const m = await missing();
      return m.sent.length === 0 && m.received.length === 0;
    }, 180_000, 500).catch(() => undefined);
    const { sent: sentNotDelivered, received: receivedNotDelivered } = await missing();
    const hooks: Hook[] = await receiver!.hooks();
    // Duplicates of one logical event share data.id.
    const idsByEvent = new Map<string, Set<string>>();
    for (const h of hooks) {
      const logical = `${h.event}:${h.data.messageId ?? h.data.providerMessageId}`;
      idsByEvent.set(logical, (idsByEvent.get(logical) ?? new Set()).add(h.data.id));
    }
    const splitDuplicates = [...idsByEvent].filter(([, s]) => s.size > 1).map(([k]) => k);
    const duplicates = hooks.length - new Set(hooks.map((h) => h.data.id)).size;

    // The template job completes with every recipient sent exactly once.
    const finalJob = await eventually(async () => {
      const res = await call("GET", `/api/v1/templates/send/${job.body.id}`, key);
      return ["completed", "failed", "cancelled"].includes(res.body.status) ? res.body : undefined;
    }, 300_000, 1_000).catch(async () => (await call("GET", `/api/v1/templates/send/${job.body.id}`, key)).body);
    const perRecipient = new Map<string, number>();
    for (const r of sim.requests) {
      const b = r.body as { type?: string; to?: string } | undefined;
      if (b?.type === "template" && r.responseStatus === 200) perRecipient.set(b.to!, (perRecipient.get(b.to!) ?? 0) + 1);
    }
    const jobSkipped = jobPhones.filter((p) => !perRecipient.has(p.slice(1)));
    const jobTwice = jobPhones.filter((p) => (perRecipient.get(p.slice(1)) ?? 0) > 1);

    // Analytics counts every outbound message once, by its current status (the statuses the webhook saw last).
    const outbound = ids.length + JOB_RECIPIENTS;
    // Read afresh on every poll: the last `message.read` deliveries may still be on their way when the job completes
    // (a snapshot taken here once missed 2 of 6,522 that arrived a moment later).
    const readDelivered = async () => new Set((await receiver!.hooks()).filter((h) => h.event === "message.read").map((h) => h.data.messageId as string));
    const day = new Date().toISOString().slice(0, 10);
    const analytics = await eventually(async () => {
      const res = await call("GET", `/api/v1/analytics?startDate=${day}&endDate=${day}`, key);
      return res.status === 200 && res.body.outboundMessages.total === outbound && res.body.outboundMessages.counts.read === (await readDelivered()).size ? res.body : undefined;
    }, 180_000, 500).catch(async () => (await call("GET", `/api/v1/analytics?startDate=${day}&endDate=${day}`, key)).body);
    const readIds = await readDelivered();
    // Which messages analytics does not count as read although their `message.read` was delivered (for the report).
    const notReadInAnalytics: Array<{ message_id: string; status: string; updated_at: Date }> = [];
    if (analytics?.outboundMessages?.counts?.read !== readIds.size) {
      const c = new Client({ connectionString: pg.url });
      await c.connect();
      try {
        const r = await c.query(`SELECT message_id, status, updated_at FROM analytics.messages WHERE organization_id = $1 AND message_id = ANY($2::text[]) AND status <> 'read'`, [org.body.id, [...readIds]]);
        notReadInAnalytics.push(...r.rows);
      } finally {
        await c.end();
      }
    }

    const hangingList = await call("GET", `/admin/v1/organizations/${org.body.id}/webhooks`, admin);
    const hangingState = hangingList.body.items.find((w: { id: string }) => w.id === hangingHook.body.id);
    // The receiver always answers: its webhook must never reach the contract's 10 consecutive failures. (It did once,
    // when the suite restarted Postgres synchronously and this process, the receiver's, stopped answering meanwhile.)
    const receiverState = hangingList.body.items.find((w: { id: string }) => w.id === webhook.body.id);
    const lines = [
      "# Reliability under faults",
      "",
      "Written by the fault suite (`npm run test:faults`, test-e2e/faults/faults.test.ts) on its last run; do not edit by hand.",
      "",
      `Load during every fault: ${SENDS_PER_S} sends/s (an integrator's client retrying 5xx with the same \`Idempotency-Key\`), ` +
        `${INBOUND_PER_S} inbound messages/s from ${CONTACTS} contacts, and the provider's sent/delivered/read callbacks of every send. ` +
        "The stack runs on a PostgreSQL and a NATS of the suite's own; the webhook receiver records every delivery.",
      "",
      "| fault | injected | ready again after | retried |",
      "|---|---|---|---|",
      ...report.map((r) => `| ${r.fault} | ${r.injected} | ${r.readyAfterS} s | ${r.retried} |`),
      "",
      "## Outcome",
      "",
      `- Sends accepted (200): ${ids.length}; lost (never accepted by the provider): ${lost.length}; sent to the provider more than once: ${twice.length}.`,
      `- Logical sends (one \`Idempotency-Key\` each) that reached the provider as more than one message: ${logicalTwice.length}.`,
      `- Template job of ${JOB_RECIPIENTS} recipients (throttled to 100,000/h, running through every fault): ${finalJob.status}; sent ${finalJob.sent}, failed ${finalJob.failed}, skipped ${finalJob.skipped}; recipients never sent: ${jobSkipped.length}; sent more than once: ${jobTwice.length}.`,
      `- Analytics for the day: total ${analytics?.outboundMessages?.total} (messages stored: ${outbound}), read ${analytics?.outboundMessages?.counts?.read} (\`message.read\` delivered: ${readIds.size}).`,
      `- Inbound messages accepted by the gateway: ${inboundIds.length}; \`message.received\` never delivered to the webhook: ${receivedNotDelivered.length}.`,
      `- \`message.sent\` never delivered to the webhook: ${sentNotDelivered.length}.`,
      `- Webhook deliveries: ${hooks.length}, of which ${duplicates} duplicates (at-least-once), all sharing their event's \`data.id\`: ${splitDuplicates.length === 0 ? "yes" : `no (${splitDuplicates.length})`}.`,
      `- The receiver's webhook: ${receiverState.active ? "active" : "deactivated"}, ${receiverState.consecutiveFailures} consecutive failures at the end.`,
      `- The endpoint that hung: ${hangingState.consecutiveFailures} consecutive failures, ${hangingState.active ? "still active" : "deactivated (10 consecutive failures, as the contract says; re-enabled in Settings → Webhooks)"}; ${hangingGot} deliveries answered before and after its hang.`,
      `- Restarts by the supervisor: ${stack.names().map((x) => `${x} ${stack.restarts(x)}`).join(", ")}.`,
      "",
    ];
    writeFileSync(path.join(REPO_ROOT, "docs/reliability.md"), lines.join("\n"));

    expect(lost, "accepted sends never sent").to.deep.equal([]);
    expect(twice, "sends the provider accepted more than once").to.deep.equal([]);
    expect(logicalTwice, "one Idempotency-Key sent as several messages").to.deep.equal([]);
    expect(
      { active: receiverState.active, consecutiveFailures: receiverState.consecutiveFailures },
      "the receiver's webhook (it always answers) was deactivated by failed attempts",
    ).to.deep.equal({ active: true, consecutiveFailures: 0 });
    expect(receivedNotDelivered, "message.received never delivered").to.deep.equal([]);
    expect(sentNotDelivered, "message.sent never delivered").to.deep.equal([]);
    expect(splitDuplicates, "duplicates with different data.id").to.deep.equal([]);
    expect(finalJob.status, "the template job").to.equal("completed");
    expect(jobSkipped, "template recipients never sent").to.deep.equal([]);
    expect(jobTwice, "template recipients sent twice").to.deep.equal([]);
    expect(analytics?.outboundMessages?.total, "analytics total = messages stored").to.equal(outbound);
    expect(analytics?.outboundMessages?.counts?.read, `analytics read = message.read events; not read in analytics: ${JSON.stringify(notReadInAnalytics)}; dead-lettered: ${JSON.stringify(logs.filter((l) => l.includes("dead-lettered")).slice(-5))}`).to.equal(readIds.size);
  });
});
