/**
 * The provider simulator on a worker thread of the bench process: its own event loop, so the time it records for
 * each request (`receivedAt`) is not delayed by the bench's load generators, pollers and garbage collection. (In
 * the bench's own loop, a pause there stamped the requests that waited with the same millisecond, and the calls of
 * a longer time seemed to arrive within one second.)
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { startSimulator, type SimulatorOptions } from "@platform/provider-simulator";

/** What the bench reads of each recorded provider request. */
export interface SimRecord {
  phoneNumberId: string;
  responseStatus: number;
  receivedAt: number;
  body: { type?: string; to?: string };
}

type Command = { id: number; cmd: "reset" | "records" | "close" };

if (!isMainThread && workerData?.simThread) {
  void (async () => {
    const sim = await startSimulator(workerData.options as SimulatorOptions);
    parentPort!.on("message", async ({ id, cmd }: Command) => {
      if (cmd === "reset") sim.reset();
      if (cmd === "close") await sim.close();
      const records =
        cmd === "records"
          ? sim.requests.map((r): SimRecord => {
              const b = r.body as { type?: string; to?: string } | undefined;
              return { phoneNumberId: r.phoneNumberId, responseStatus: r.responseStatus, receivedAt: r.receivedAt, body: { type: b?.type, to: b?.to } };
            })
          : undefined;
      parentPort!.postMessage({ id, records });
    });
    parentPort!.postMessage({ url: sim.url });
  })();
}

export async function startSimulatorThread(options: SimulatorOptions) {
  const worker = new Worker(__filename, { workerData: { simThread: true, options } });
  const url = await new Promise<string>((resolve, reject) => {
    worker.once("message", (m: { url: string }) => resolve(m.url));
    worker.once("error", reject);
  });
  let next = 0;
  const ask = (cmd: Command["cmd"]) =>
    new Promise<SimRecord[] | undefined>((resolve) => {
      const id = ++next;
      const onMessage = (m: { id?: number; records?: SimRecord[] }) => {
        if (m.id !== id) return;
        worker.off("message", onMessage);
        resolve(m.records);
      };
      worker.on("message", onMessage);
      worker.postMessage({ id, cmd });
    });
  return {
    url,
    reset: async () => void (await ask("reset")),
    requests: async () => (await ask("records")) ?? [],
    close: async () => {
      await ask("close");
      await worker.terminate();
    },
  };
}
