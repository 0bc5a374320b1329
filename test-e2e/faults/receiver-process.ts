import { spawn, type ChildProcess } from "node:child_process";

/** One webhook delivery as the integrator's endpoint got it. */
export interface Hook {
  event: string;
  data: Record<string, any>;
}

/**
 * The integrator's webhook receiver, in a process of its own: it keeps every delivery (`POST`, answered 204 at once)
 * and gives them back on `GET /hooks`, and the count of `message.received` per provider message id on
 * `GET /received`. In the test's process it shared the event loop that drives the load, answered late on a busy host,
 * and its webhook was deactivated by 10 failed attempts (then, as the contract says, it got nothing more).
 */
const RECEIVER = `
const http = require("node:http");
const hooks = [];
const received = {};
const server = http.createServer((req, res) => {
  if (req.method === "GET") {
    res.writeHead(200, { "Content-Type": "application/json" });
    return res.end(JSON.stringify(req.url === "/received" ? received : hooks));
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const hook = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    hooks.push(hook);
    if (hook.event === "message.received") received[hook.data.providerMessageId] = (received[hook.data.providerMessageId] || 0) + 1;
    res.writeHead(204).end();
  });
});
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\\n"));
process.on("disconnect", () => process.exit(0));
`;

export interface ReceiverProcess {
  child: ChildProcess;
  /** The endpoint to subscribe: `${url}/hooks`. */
  url: string;
  hooks(): Promise<Hook[]>;
  received(): Promise<Record<string, number>>;
  stop(): void;
}

export async function startReceiverProcess(): Promise<ReceiverProcess> {
  const child = spawn(process.execPath, ["-e", RECEIVER], { stdio: ["ignore", "pipe", "inherit", "ipc"] });
  const port = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString("utf8");
      if (out.includes("\n")) resolve(out.trim());
    });
    child.once("exit", (code) => reject(new Error(`the receiver exited (${code})`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    child,
    url,
    hooks: async () => (await fetch(`${url}/hooks`)).json() as Promise<Hook[]>,
    received: async () => (await fetch(`${url}/received`)).json() as Promise<Record<string, number>>,
    stop: () => {
      child.kill();
    },
  };
}
