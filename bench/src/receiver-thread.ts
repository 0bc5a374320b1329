/**
 * The integrator's webhook receiver of the inbound bench, on a worker thread of the bench process: its own event
 * loop, so the load generator's pushes and the answers they time are not held up by a thousand deliveries a second,
 * and the time stamped on each delivery is not held up by the load generator. (On the bench's one loop, its own
 * delay reached a p99 of 31–36 ms and a max of 136–167 ms at 1,000 inbound messages per second, and that delay was in
 * every latency the bench reported.)
 *
 * Each delivery is stamped on arrival (`performance.timeOrigin + performance.now()`, the clock the load generator
 * stamps its pushes with) and keyed `event|providerMessageId`; the first arrival of a key counts, later ones are
 * duplicates. The arrivals reach the main thread in lumps every few milliseconds.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";

/** How often the worker hands its new arrivals to the main thread. */
const FLUSH_MS = 20;

type FromWorker = { url: string } | { arrivals: Array<[string, number]>; duplicates: number } | { closed: true };

if (!isMainThread && workerData?.receiverThread) {
  const seen = new Set<string>();
  let fresh: Array<[string, number]> = [];
  let duplicates = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = performance.timeOrigin + performance.now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { event: string; data: { providerMessageId?: string } };
        const key = `${body.event}|${body.data.providerMessageId ?? ""}`;
        if (seen.has(key)) duplicates++;
        else {
          seen.add(key);
          fresh.push([key, at]);
        }
      } catch {
        /* not ours */
      }
      res.writeHead(200).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  let reported = 0;
  const flush = () => {
    if (fresh.length === 0 && duplicates === reported) return;
    parentPort!.postMessage({ arrivals: fresh, duplicates } satisfies FromWorker);
    fresh = [];
    reported = duplicates;
  };
  const timer = setInterval(flush, FLUSH_MS);
  parentPort!.on("message", (m: { cmd: "close" }) => {
    if (m.cmd !== "close") return;
    clearInterval(timer);
    flush();
    server.closeAllConnections();
    server.close(() => parentPort!.postMessage({ closed: true } satisfies FromWorker));
  });
  server.listen(0, "127.0.0.1", () => parentPort!.postMessage({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` } satisfies FromWorker));
}

/** Starts the receiver thread; `arrivals` (first arrival per key) fills in as the worker reports. */
export async function startReceiverThread(): Promise<{ url: string; arrivals: Map<string, number>; duplicates: () => number; close: () => Promise<void> }> {
  const worker = new Worker(__filename, { workerData: { receiverThread: true } });
  const arrivals = new Map<string, number>();
  let duplicates = 0;
  let onClosed: (() => void) | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    worker.on("message", (m: FromWorker) => {
      if ("url" in m) resolve(m.url);
      else if ("arrivals" in m) {
        for (const [key, at] of m.arrivals) arrivals.set(key, at);
        duplicates = m.duplicates;
      } else onClosed?.();
    });
    worker.once("error", reject);
  });
  return {
    url,
    arrivals,
    duplicates: () => duplicates,
    close: async () => {
      await new Promise<void>((resolve) => {
        onClosed = resolve;
        worker.postMessage({ cmd: "close" });
      });
      await worker.terminate();
    },
  };
}
