import { freePort, startStack, type Stack } from "@platform/stack";
import { createTestEnvironment, type TestEnvironment } from "@platform/testing";

/**
 * The whole stack as `npm start` runs it (every service its own process, the
 * provider simulator), on this run's own database, namespace and port.
 * Tests talk to it through the gateway only, as an integrator would.
 */
/**
 * Copies of every service and gateway the suites run against: `E2E_REPLICAS=2`
 * (as `npm run test:replicas` sets) runs each suite on two gateways and two
 * replicas of every service behind local round-robins (packages/stack `replicas`).
 */
export const E2E_REPLICAS = Math.max(1, Number(process.env.E2E_REPLICAS ?? 1) || 1);

/** A process's service: `messaging-2` → `messaging` (names carry a replica suffix when there are several). */
export function serviceOf(processName: string): string {
  return E2E_REPLICAS > 1 ? processName.replace(/-\d+$/, "") : processName;
}

export class E2E {
  env!: TestEnvironment;
  stack!: Stack;
  logs: string[] = [];

  async start(extraEnv: Record<string, string> = {}, opts: { replicas?: number } = {}): Promise<this> {
    this.env = await createTestEnvironment("e2e");
    this.stack = await startStack({
      port: await freePort(),
      databaseUrl: this.env.databaseUrl,
      natsUrl: this.env.natsUrl,
      namespace: this.env.namespace,
      replicas: opts.replicas ?? E2E_REPLICAS,
      env: { LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", CONVERSATION_IDLE_TIMEOUT_MS: "86400000", ...extraEnv },
      onLog: (line) => {
        this.logs.push(line);
        if (process.env.E2E_VERBOSE) process.stdout.write(line + "\n");
      },
    });
    try {
      await this.stack.waitReady(120_000);
    } catch (err) {
      process.stdout.write(this.logs.slice(-40).join("\n") + "\n");
      throw err;
    }
    return this;
  }

  async stop(): Promise<void> {
    await this.stack?.stop();
    await this.env?.cleanup();
  }

  async call(method: string, path: string, opts: { token?: string; body?: unknown; headers?: Record<string, string>; baseUrl?: string } = {}) {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch((opts.baseUrl ?? this.stack.url) + path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body, headers: res.headers };
  }

  admin(method: string, path: string, body?: unknown) {
    return this.call(method, path, { token: this.stack.adminToken, body });
  }

  async organization(body: Record<string, unknown> = {}) {
    const org = await this.admin("POST", "/admin/v1/organizations", { name: "E2E Org", ...body });
    if (org.status !== 201) throw new Error(`organization: ${org.status} ${JSON.stringify(org.body)}`);
    const key = await this.admin("POST", `/admin/v1/organizations/${org.body.id}/api-keys`, { name: "e2e" });
    if (key.status !== 201) throw new Error(`key: ${key.status} ${JSON.stringify(key.body)}`);
    return { id: org.body.id as string, key: key.body.key as string, keyId: key.body.id as string };
  }

  /** The base URLs of every process of a service (one per replica; the gateways' own URLs for `gateway`). */
  serviceUrls(service: string): string[] {
    if (service === "gateway") return this.stack.gatewayUrls;
    return this.stack
      .names()
      .filter((n) => serviceOf(n) === service)
      .map((n) => this.stack.serviceUrl(n))
      .filter((u): u is string => u !== undefined);
  }
}
