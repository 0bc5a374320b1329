// CPU per call of the two HTTP clients of the hot paths, as the services make them (an AsyncLocalStorage active, as
// @platform/logging's request context is), against a node:http server in its own process; same minutes, alternated.
//   dispatcher: undici.request on an Agent, body read with for-await up to 8 KB  vs  post(agent, { readLimit })
//   provider client: Pool.request with an AbortSignal and a timer, body.text()  vs  post(pool, { timeoutMs })
// usage: node bench/micro/http-client-cpu.js [worktree] [calls] [concurrency] [rounds]
const { fork } = require("node:child_process");
const http = require("node:http");
const { AsyncLocalStorage } = require("node:async_hooks");
if (process.argv[2] === "--server") {
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "text/plain", "content-length": "2" }).end("ok"));
  });
  srv.keepAliveTimeout = 60_000;
  srv.listen(0, "127.0.0.1", () => process.send(srv.address().port));
  process.on("message", (m) => (m === "cpu" ? process.send({ cpu: process.cpuUsage() }) : process.exit(0)));
  return;
}
const wt = process.argv[2] ?? require("node:path").resolve(__dirname, "../..");
const N = Number(process.argv[3] ?? 20000), C = Number(process.argv[4] ?? 32), ROUNDS = Number(process.argv[5] ?? 3);
const r = (p) => require(require.resolve(p, { paths: [`${wt}/packages/runtime`] }));
const undici = r("undici");
const { post, postTarget } = r("@platform/runtime");

const body = Buffer.from(JSON.stringify({ event: "message.delivered", timestamp: new Date().toISOString(), organizationId: "org_0123456789abcdef", data: { id: "evt_01JABCDEFGHJKMNPQRSTVWXYZ0", messageId: "msg_01JABCDEFGHJKMNPQRSTVWXYZ0", status: "delivered", pad: "x".repeat(200) } }));
const headers = { "content-type": "application/json", "user-agent": "platform-webhooks/1", "x-service-signature": `sha256=${"a".repeat(64)}`, "webhook-id": "evt_01JABCDEF", "webhook-timestamp": "1764160000", "webhook-signature": `v1,${"b".repeat(44)}` };
const READ_LIMIT = 8 * 1024;
const clients = {
  "dispatcher, undici.request": {
    make: () => new undici.Agent({ keepAliveTimeout: 30_000, connections: null }),
    call: async (agent, url) => {
      const res = await undici.request(url, { method: "POST", headers, body, dispatcher: agent });
      const chunks = [];
      let size = 0;
      for await (const chunk of res.body) { chunks.push(chunk); size += chunk.length; if (size >= READ_LIMIT) break; }
      return Buffer.concat(chunks).toString("utf8");
    },
  },
  "dispatcher, post": {
    make: () => new undici.Agent({ keepAliveTimeout: 30_000, connections: null }),
    call: async (agent, url) => (await post(agent, postTarget(url), headers, body, { readLimit: READ_LIMIT })).body.toString("utf8"),
  },
  "provider client, Pool.request": {
    make: (origin) => new undici.Pool(origin, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 }),
    call: async (pool) => {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), 10_000);
      try {
        const res = await pool.request({ method: "POST", path: "/hook", headers, body: body.toString(), signal: controller.signal });
        return await res.body.text();
      } finally {
        clearTimeout(timer);
      }
    },
  },
  "provider client, post": {
    make: (origin) => new undici.Pool(origin, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 }),
    call: async (pool, _url, origin) => (await post(pool, { origin, path: "/hook" }, headers, body.toString(), { timeoutMs: 10_000 })).body.toString("utf8"),
  },
};
const cpuOf = (child) => new Promise((resolve) => { child.once("message", (m) => resolve(m.cpu)); child.send("cpu"); });
const ms = (c) => (c.user + c.system) / 1000;
async function measure(name) {
  const server = fork(__filename, ["--server"]);
  const port = await new Promise((resolve) => server.once("message", resolve));
  const origin = `http://127.0.0.1:${port}`, url = `${origin}/hook`;
  const { make, call } = clients[name];
  const dispatcher = make(origin);
  const burst = async (n) => { let i = 0; await Promise.all(Array.from({ length: C }, async () => { while (i++ < n) await call(dispatcher, url, origin); })); };
  await burst(3000); // warm-up: JIT, sockets
  const s0 = await cpuOf(server), c0 = process.cpuUsage(), t0 = performance.now();
  await burst(N);
  const seconds = (performance.now() - t0) / 1000, client = ms(process.cpuUsage(c0)) / N, s1 = await cpuOf(server);
  await dispatcher.close();
  server.send("exit");
  return { client, server: (ms(s1) - ms(s0)) / N, perSecond: N / seconds };
}
(async () => {
  new AsyncLocalStorage().enterWith({ requestId: "req_bench" });
  console.log(`${N} POSTs per run, ${C} in flight, ${ROUNDS} rounds; CPU ms per call (client process; the server's in brackets)`);
  const rows = Object.fromEntries(Object.keys(clients).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of Object.keys(clients)) {
      const m = await measure(name);
      rows[name].push(m);
      console.log(`  ${name.padEnd(30)} ${m.client.toFixed(3)} (${m.server.toFixed(3)}), ${Math.round(m.perSecond)}/s`);
    }
  }
  const range = (xs) => `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;
  console.log("| client | CPU ms per call, client | server (reference) | calls /s |\n|---|---|---|---|");
  for (const [name, ms] of Object.entries(rows)) console.log(`| ${name} | ${range(ms.map((m) => m.client))} | ${range(ms.map((m) => m.server))} | ${Math.round(Math.min(...ms.map((m) => m.perSecond)))}–${Math.round(Math.max(...ms.map((m) => m.perSecond)))} |`);
})();
