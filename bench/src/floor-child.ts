/**
 * The processes of the floor benchmark (`floor.ts`), one role each, so that each side's CPU is its own:
 *
 *   http-server                       node:http, reads the body, answers 200 with a small JSON
 *   http-client URL RATE SECONDS BURST
 *                                     undici POSTs of a 600-byte JSON body (the dispatcher's client), BURST at a time
 *   js-pub NATS SUBJECT RATE SECONDS BURST
 *                                     JetStream publishes (each with its Nats-Msg-Id) in bursts of BURST, every ack awaited
 *   js-sub NATS STREAM DURABLE COUNT  a durable consumer that acks each message, the acks of a turn written together
 *   req-server NATS SUBJECT           answers core requests
 *   req-client NATS SUBJECT RATE SECONDS
 *                                     core request/reply
 *   pg-tx DATABASE_URL RATE SECONDS ROWS
 *                                     BEGIN, one INSERT of ROWS rows (unnest), COMMIT; stays connected until killed
 *
 * The clients pace themselves at RATE operations per second spread over each millisecond (BURST together), print
 * `{"done": n, "failed": m, "cpuMs": c}` (c: their CPU from the first operation to the last) and exit; so does js-sub; the servers print `{"port": p}` or `{"ready": true}` and run until killed.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { connect, AckPolicy, headers as natsHeaders, type JsMsg } from "nats";
import { Pool as PgPool } from "pg";
import { Pool } from "undici";

const [role, ...args] = process.argv.slice(2);
const print = (o: object) => process.stdout.write(JSON.stringify(o) + "\n");
const BODY = JSON.stringify({
  id: "evt_01jd0000000000000000000000",
  type: "message.received",
  createdAt: new Date().toISOString(),
  organizationId: "org_01jd0000000000000000000000",
  data: {
    messageId: "msg_01jd0000000000000000000000",
    conversationId: "cnv_01jd0000000000000000000000",
    contactId: "cnt_01jd0000000000000000000000",
    messagingChannelId: "chn_01jd0000000000000000000000",
    phone: "+14155550100",
    type: "text",
    text: "Hello, I would like to know more about the offer you sent me yesterday, thanks!",
    providerMessageId: "wamid.HBgLMTQxNTU1NTAxMDAVAgASGBQzQTRBMEI1RjE2M0Y0RjY2QkY3NQA=",
    receivedAt: new Date().toISOString(),
  },
});

/** CPU milliseconds (user + system) of this process since `from`. */
const cpuMsSince = (from: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
};

/** Calls `op` `rate` times per second for `seconds`, `burst` at a time, on a 1 ms clock; resolves when every call settled. */
async function paced(rate: number, seconds: number, burst: number, op: (i: number) => Promise<unknown>): Promise<void> {
  const total = Math.round(rate * seconds);
  const cpu = process.cpuUsage();
  const start = performance.now();
  let issued = 0;
  let failed = 0;
  const pending = new Set<Promise<unknown>>();
  while (issued < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate / burst) * burst + burst);
    while (issued < due) {
      const p = op(issued++).catch(() => failed++);
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(pending);
  print({ done: total - failed, failed, cpuMs: cpuMsSince(cpu) });
}

async function main(): Promise<void> {
  switch (role) {
    case "http-server": {
      const server = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end('{"received":true}');
        });
      });
      server.keepAliveTimeout = 60_000;
      server.listen(0, "127.0.0.1", () => print({ port: (server.address() as AddressInfo).port }));
      return;
    }
    case "http-client": {
      const [url, rate, seconds, burst] = [args[0], Number(args[1]), Number(args[2]), Number(args[3])];
      const pool = new Pool(url, { connections: 32, keepAliveTimeout: 60_000 });
      await paced(rate, seconds, burst, async () => {
        const res = await pool.request({ path: "/hook", method: "POST", body: BODY, headers: { "content-type": "application/json" } });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(String(res.statusCode));
      });
      await pool.close();
      process.exit(0);
    }
    case "js-pub": {
      const [url, subject, rate, seconds, burst] = [args[0], args[1], Number(args[2]), Number(args[3]), Number(args[4])];
      const nc = await connect({ servers: url, noAsyncTraces: true });
      const js = nc.jetstream();
      const data = new TextEncoder().encode(BODY);
      const run = Date.now().toString(36);
      await paced(rate, seconds, burst, (i) => {
        const h = natsHeaders();
        h.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        return js.publish(subject, data, { msgID: `${run}-${i}`, headers: h });
      });
      await nc.close();
      process.exit(0);
    }
    case "js-sub": {
      const [url, stream, durable, count] = [args[0], args[1], args[2], Number(args[3])];
      const nc = await connect({ servers: url, noAsyncTraces: true });
      const jsm = await nc.jetstreamManager();
      await jsm.consumers.add(stream, { durable_name: durable, ack_policy: AckPolicy.Explicit, max_ack_pending: 1_000 });
      const consumer = await nc.jetstream().consumers.get(stream, durable);
      const messages = await consumer.consume({ max_messages: 64 });
      print({ ready: true });
      let seen = 0;
      let cpu: NodeJS.CpuUsage | undefined;
      let acks: JsMsg[] = [];
      let scheduled = false;
      for await (const m of messages) {
        cpu ??= process.cpuUsage();
        JSON.parse(new TextDecoder().decode(m.data));
        acks.push(m);
        if (!scheduled) {
          scheduled = true;
          setImmediate(() => {
            scheduled = false;
            const now = acks;
            acks = [];
            for (const a of now) a.ack();
          });
        }
        if (++seen >= count) break;
      }
      await new Promise((r) => setImmediate(r));
      await nc.flush();
      print({ done: seen, failed: 0, cpuMs: cpuMsSince(cpu!) });
      await nc.close();
      process.exit(0);
    }
    case "req-server": {
      const [url, subject] = args;
      const nc = await connect({ servers: url, noAsyncTraces: true });
      const answer = new TextEncoder().encode('{"ok":true,"contacts":[["+14155550100","cnt_01jd0000000000000000000000"]]}');
      nc.subscribe(subject, { callback: (_err, m) => m.respond(answer) });
      await nc.flush();
      print({ ready: true });
      return;
    }
    case "req-client": {
      const [url, subject, rate, seconds] = [args[0], args[1], Number(args[2]), Number(args[3])];
      const nc = await connect({ servers: url, noAsyncTraces: true });
      const data = new TextEncoder().encode('{"organizationId":"org_01jd0000000000000000000000","phones":["+14155550100","+14155550101"]}');
      await paced(rate, seconds, 1, (): Promise<unknown> => nc.request(subject, data, { timeout: 5_000 }));
      await nc.close();
      process.exit(0);
    }
    case "pg-tx": {
      const [url, rate, seconds, rows] = [args[0], Number(args[1]), Number(args[2]), Number(args[3])];
      const pool = new PgPool({ connectionString: url, max: 4 });
      await pool.query(`CREATE TABLE IF NOT EXISTS floor_rows (id text PRIMARY KEY, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
      const run = Date.now().toString(36);
      await paced(rate, seconds, 1, async (i) => {
        const client = await pool.connect();
        try {
          await client.query("BEGIN");
          const ids = Array.from({ length: rows }, (_, k) => `${run}-${i}-${k}`);
          await client.query({ name: "floor.insert", text: `INSERT INTO floor_rows (id, body) SELECT id, $2 FROM unnest($1::text[]) AS id`, values: [ids, BODY] });
          await client.query("COMMIT");
        } finally {
          client.release();
        }
      });
      // Stays connected until killed, so that its backends' CPU can still be read.
      return;
    }
    default:
      process.stderr.write(`unknown role ${role}\n`);
      process.exit(2);
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
