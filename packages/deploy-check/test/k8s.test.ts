import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { z } from "zod";
import { internalServiceEnv, parseEnv } from "@platform/config";
import { OVERLAYS, REPO_ROOT, render, validateObject, type K8sObject, type Overlay } from "../src/render";

/** Every service of the platform and the Postgres schema (= database role) it owns. A new service goes here. */
const SERVICES: Record<string, string> = {
  gateway: "gateway",
  messaging: "messaging",
  contacts: "contacts",
  "webhook-dispatcher": "webhooks",
  "template-jobs": "template_jobs",
  analytics: "analytics",
};
const INTERNAL = Object.keys(SERVICES).filter((s) => s !== "gateway");
/**
 * Postgres connections one replica may open (@platform/db, @platform/bus): TypeORM's pool (10, the gateway 20), the
 * hot-statement pool (4) of a service with an outbox or prepared statements, the bulk pool (4) of the pipeline's
 * set-based writes (messaging, contacts, the dispatcher), and the outbox relay's own connection (1).
 */
const DB_CONNECTIONS_PER_REPLICA: Record<string, number> = {
  gateway: 20 + 4 + 1,
  messaging: 10 + 4 + 4 + 1,
  contacts: 10 + 4 + 4 + 1,
  "webhook-dispatcher": 10 + 4 + 4,
  "template-jobs": 10 + 4 + 1,
  analytics: 10,
};
/** Left for the operator, streaming replication and a superuser session. */
const POSTGRES_RESERVED_CONNECTIONS = 20;
/** Shutdown budget of a service process after SIGTERM (@platform/runtime Lifecycle). */
const PROCESS_DRAIN_S = 10;
const SENSITIVE = /TOKEN|SECRET|PASSWORD|DATABASE_URL/;
const PRIVATE_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8"];

const matches = (selector: { matchLabels?: Record<string, string>; matchExpressions?: any[] } | undefined, labels: Record<string, string>) => {
  if (!selector) return false;
  const okLabels = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const okExprs = (selector.matchExpressions ?? []).every((e) =>
    e.operator === "In" ? e.values.includes(labels[e.key]) : e.operator === "NotIn" ? !e.values.includes(labels[e.key]) : e.operator === "Exists" ? e.key in labels : !(e.key in labels),
  );
  return okLabels && okExprs;
};

function workloadRules(o: K8sObject): string[] {
  const problems: string[] = [];
  const pod = o.spec.template.spec;
  const where = `${o.kind} ${o.metadata.name}`;
  if (pod.securityContext?.runAsNonRoot !== true) problems.push(`${where}: pod securityContext.runAsNonRoot is not true`);
  for (const c of pod.containers) {
    const sc = c.securityContext ?? {};
    if (sc.readOnlyRootFilesystem !== true) problems.push(`${where}/${c.name}: readOnlyRootFilesystem is not true`);
    if (sc.allowPrivilegeEscalation !== false) problems.push(`${where}/${c.name}: allowPrivilegeEscalation is not false`);
    if (sc.runAsNonRoot !== true) problems.push(`${where}/${c.name}: runAsNonRoot is not true`);
    if (!(sc.capabilities?.drop ?? []).includes("ALL")) problems.push(`${where}/${c.name}: capabilities do not drop ALL`);
    if (sc.privileged) problems.push(`${where}/${c.name}: privileged`);
    for (const kind of ["requests", "limits"]) {
      for (const res of ["cpu", "memory"]) if (!c.resources?.[kind]?.[res]) problems.push(`${where}/${c.name}: no ${res} ${kind}`);
    }
    if (!c.readinessProbe || !c.livenessProbe || !c.startupProbe) problems.push(`${where}/${c.name}: missing a readiness, liveness or startup probe`);
    for (const e of c.env ?? []) {
      if (SENSITIVE.test(e.name) && e.value !== undefined && !/^postgres:\/\/\$\(DB_USER\):\$\(DB_PASSWORD\)@/.test(e.value)) {
        problems.push(`${where}/${c.name}: ${e.name} has a literal value (must come from a Secret)`);
      }
    }
  }
  return problems;
}

for (const overlay of OVERLAYS) {
  describe(`k8s/overlays/${overlay} (kubectl kustomize, offline schemas)`, () => {
    let objects: K8sObject[];
    const all = (kind: string) => objects.filter((o) => o.kind === kind);
    const one = (kind: string, name: string) => {
      const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
      if (!found) throw new Error(`${overlay}: no ${kind} ${name}`);
      return found;
    };
    const deployment = (name: string) => one("Deployment", name);
    const container = (name: string) => deployment(name).spec.template.spec.containers[0];

    before(() => {
      objects = render(overlay as Overlay);
    });

    it("renders, and every object is valid against the Kubernetes schemas", () => {
      expect(objects.length).to.be.greaterThan(40);
      const problems = objects.flatMap((o) => validateObject(o).map((p) => `${o.kind} ${o.metadata?.name}: ${p}`));
      expect(problems).to.deep.equal([]);
      expect(objects.every((o) => o.kind === "Namespace" || o.metadata.namespace === "messaging")).to.equal(true);
    });

    it("has a Deployment, Service, ConfigMap, HPA, PDB and NetworkPolicy for every service, and nothing unaccounted for", () => {
      const services = all("Deployment").filter((d) => ["edge", "internal"].includes(d.spec.template.metadata.labels.tier)).map((d) => d.metadata.name);
      expect(services.sort()).to.deep.equal(Object.keys(SERVICES).sort());
      for (const d of all("Deployment")) {
        const name = d.metadata.name;
        const labels = d.spec.template.metadata.labels;
        expect(matches(d.spec.selector, labels), `${name} selector`).to.equal(true);
        expect(all("Service").some((s) => Object.entries(s.spec.selector ?? {}).every(([k, v]) => labels[k] === v)), `${name}: Service`).to.equal(true);
        const policies = all("NetworkPolicy").filter((p) => matches(p.spec.podSelector, labels) && Object.keys(p.spec.podSelector).length > 0);
        expect(policies.some((p) => p.spec.policyTypes.includes("Ingress")), `${name}: ingress NetworkPolicy`).to.equal(true);
        expect(policies.some((p) => p.spec.policyTypes.includes("Egress")), `${name}: egress NetworkPolicy`).to.equal(true);
        if (d.metadata.name === "provider-simulator") continue; // development stand-in, one replica
        expect(all("HorizontalPodAutoscaler").filter((h) => h.spec.scaleTargetRef.kind === "Deployment" && h.spec.scaleTargetRef.name === name), `${name}: HPA`).to.have.length(1);
        expect(all("PodDisruptionBudget").filter((p) => matches(p.spec.selector, labels)), `${name}: PDB`).to.have.length(1);
        expect(all("ConfigMap").some((c) => c.metadata.name.startsWith(`${name}-config`)), `${name}: ConfigMap`).to.equal(true);
      }
    });

    it("runs every service as `node dist/index.js` with probes on /readyz, /healthz and a startup probe", () => {
      for (const name of Object.keys(SERVICES)) {
        const c = container(name);
        expect(c.workingDir).to.equal(`/app/services/${name}`);
        expect(c.command[0]).to.equal("node");
        expect(c.command.at(-1)).to.equal("dist/index.js");
        expect(c.readinessProbe.httpGet.path, name).to.equal("/readyz");
        expect(c.livenessProbe.httpGet.path, name).to.equal("/healthz");
        expect(c.startupProbe.httpGet.path, name).to.equal("/healthz");
        expect(c.ports.some((p: any) => p.name === c.readinessProbe.httpGet.port)).to.equal(true);
      }
    });

    it("gives every workload limits, non-root, a read-only root, no privilege escalation, no capabilities", () => {
      const problems = [...all("Deployment"), ...all("StatefulSet")].flatMap(workloadRules);
      expect(problems).to.deep.equal([]);
    });

    it("stops a service within its grace period: preStop + the process's drain < terminationGracePeriodSeconds", () => {
      for (const name of Object.keys(SERVICES)) {
        const pod = deployment(name).spec.template.spec;
        const preStop = pod.containers[0].lifecycle?.preStop?.exec?.command;
        const preStopS = preStop?.[0] === "sleep" ? Number(preStop[1]) : 0;
        expect(pod.terminationGracePeriodSeconds, name).to.be.greaterThan(preStopS + PROCESS_DRAIN_S);
      }
    });

    it("spreads every service's replicas over nodes and zones", () => {
      for (const name of Object.keys(SERVICES)) {
        const spec = deployment(name).spec.template.spec;
        const keys = (spec.topologySpreadConstraints ?? []).filter((t: any) => matches(t.labelSelector, spec.labels ?? deployment(name).spec.template.metadata.labels)).map((t: any) => t.topologyKey);
        expect(keys, name).to.include.members(["kubernetes.io/hostname", "topology.kubernetes.io/zone"]);
      }
    });

    it("commits no Secret values: no Secret object, and every token, password and URL with credentials comes from a secretKeyRef", () => {
      expect(all("Secret")).to.deep.equal([]);
      for (const name of Object.keys(SERVICES)) {
        const env: any[] = container(name).env;
        const byName = new Map(env.map((e) => [e.name, e]));
        expect(byName.get("INTERNAL_TOKEN")?.valueFrom?.secretKeyRef?.name, name).to.equal("platform-internal-token");
        const role = `postgres-role-${SERVICES[name].replace(/_/g, "-")}`;
        expect(byName.get("DB_USER")?.valueFrom?.secretKeyRef, name).to.deep.equal({ name: role, key: "username" });
        expect(byName.get("DB_PASSWORD")?.valueFrom?.secretKeyRef, name).to.deep.equal({ name: role, key: "password" });
        // $(VAR) expands only variables defined earlier in the list.
        expect(env.findIndex((e) => e.name === "DATABASE_URL"), name).to.be.greaterThan(env.findIndex((e) => e.name === "DB_PASSWORD"));
      }
      for (const cm of all("ConfigMap")) {
        for (const key of Object.keys(cm.data ?? {})) expect(SENSITIVE.test(key), `${cm.metadata.name}.${key}`).to.equal(false);
      }
    });

    it("denies by default; only the gateway is reachable from the ingress controller; services only from the gateway", () => {
      const deny = all("NetworkPolicy").find((p) => Object.keys(p.spec.podSelector).length === 0 && !p.spec.ingress && !p.spec.egress);
      expect(deny?.spec.policyTypes).to.have.members(["Ingress", "Egress"]);
      const ingress = all("Ingress");
      expect([...new Set(ingress.flatMap((i) => i.spec.rules.flatMap((r: any) => r.http.paths.map((p: any) => p.backend.service.name))))]).to.deep.equal(["gateway"]);
      const fromIngressController = all("NetworkPolicy").filter((p) =>
        (p.spec.ingress ?? []).some((r: any) => (r.from ?? []).some((f: any) => f.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"] === "ingress-nginx")),
      );
      expect(fromIngressController.map((p) => p.metadata.name)).to.deep.equal(["gateway"]);
      for (const name of INTERNAL) {
        const labels = deployment(name).spec.template.metadata.labels;
        const peers = all("NetworkPolicy")
          .filter((p) => matches(p.spec.podSelector, labels) && (p.spec.policyTypes ?? []).includes("Ingress"))
          .flatMap((p) => (p.spec.ingress ?? []).flatMap((r: any) => r.from ?? [{ anything: true }]));
        for (const peer of peers) {
          const fromGateway = peer.podSelector?.matchLabels?.app === "gateway" && !peer.namespaceSelector;
          const fromMonitoring = peer.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"] === "monitoring" && !peer.podSelector;
          expect(fromGateway || fromMonitoring, `${name} accepts ${JSON.stringify(peer)}`).to.equal(true);
        }
      }
    });

    it("lets services out only to Postgres, NATS and DNS, plus the provider (messaging, template-jobs) and the public internet (webhook dispatcher)", () => {
      for (const name of Object.keys(SERVICES)) {
        const labels = deployment(name).spec.template.metadata.labels;
        const rules = all("NetworkPolicy")
          .filter((p) => matches(p.spec.podSelector, labels) && (p.spec.policyTypes ?? []).includes("Egress"))
          .flatMap((p) => p.spec.egress ?? []);
        const blocks = rules.flatMap((r: any) => (r.to ?? [{ ipBlock: { cidr: "0.0.0.0/0", except: [] } }]).filter((t: any) => t.ipBlock));
        if (["messaging", "template-jobs", "webhook-dispatcher"].includes(name) && overlay === "prod") expect(blocks, name).to.not.be.empty;
        if (!["messaging", "template-jobs", "webhook-dispatcher"].includes(name)) expect(blocks, name).to.deep.equal([]);
        for (const b of blocks) {
          if (b.ipBlock.cidr === "0.0.0.0/0") expect(b.ipBlock.except, name).to.include.members(PRIVATE_RANGES);
          if (b.ipBlock.cidr === "::/0") expect(b.ipBlock.except, name).to.include.members(["fc00::/7", "fe80::/10"]);
        }
        const podPeers = rules.flatMap((r: any) => (r.to ?? []).filter((t: any) => t.podSelector || t.namespaceSelector));
        for (const peer of podPeers) {
          const target = peer.podSelector?.matchLabels ?? {};
          const ok =
            target["cnpg.io/cluster"] === "postgres" ||
            target.app === "nats" ||
            target["k8s-app"] === "kube-dns" ||
            (name === "gateway" && target.tier === "internal") ||
            (overlay === "dev" && target.app === "provider-simulator" && ["messaging", "template-jobs"].includes(name));
          expect(ok, `${name} may reach ${JSON.stringify(peer)}`).to.equal(true);
        }
      }
    });

    it("renders a NATS configuration that nats-server accepts, clustered with all peers when there are several", () => {
      const conf = all("ConfigMap").find((c) => c.metadata.name.startsWith("nats-config"))!.data["nats.conf"];
      const server = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) => existsSync(p)) ?? "nats-server";
      const dir = mkdtempSync(path.join(os.tmpdir(), "nats-conf-"));
      try {
        writeFileSync(path.join(dir, "nats.conf"), conf);
        const out = execFileSync(server, ["-c", path.join(dir, "nats.conf"), "-t"], { encoding: "utf8", env: { ...process.env, POD_NAME: "nats-0" }, stdio: "pipe" });
        expect(out + "").to.not.match(/invalid|error/i);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const sts = one("StatefulSet", "nats");
      const routes = conf.match(/nats:\/\/nats-\d+\.nats-headless:6222/g) ?? [];
      if (sts.spec.replicas > 1) expect(routes.length).to.equal(sts.spec.replicas);
      else expect(conf).to.not.match(/cluster\s*{/);
      expect(conf).to.match(/pid_file: "\/var\/run\/nats\/nats.pid"/);
      expect(sts.spec.template.spec.containers[0].lifecycle.preStop.exec.command.join(" ")).to.include("ldm=/var/run/nats/nats.pid");
    });

    it("gives every built service an environment its own schema accepts, with no unknown variable", () => {
      const built = Object.keys(SERVICES).filter((name) => existsSync(path.join(REPO_ROOT, "services", name, "dist/env.js")));
      expect(built).to.include.members(["gateway", "messaging", "contacts", "webhook-dispatcher"]);
      for (const name of built) {
        const mod = require(path.join(REPO_ROOT, "services", name, "dist/env.js")) as { envSchema?: z.ZodObject<z.ZodRawShape>; envShape?: z.ZodRawShape };
        const schema = mod.envSchema ?? z.object({ ...internalServiceEnv, ...mod.envShape });
        const c = container(name);
        const env: Record<string, string> = {};
        for (const ref of c.envFrom) {
          const cm = all("ConfigMap").find((m) => m.metadata.name === ref.configMapRef.name);
          expect(cm, `${name}: ConfigMap ${ref.configMapRef.name}`).to.not.equal(undefined);
          Object.assign(env, cm!.data);
        }
        for (const e of c.env) {
          if (e.value !== undefined) env[e.name] = e.value.replace("$(DB_USER)", "role").replace("$(DB_PASSWORD)", "0123456789abcdef");
          else if (e.valueFrom?.secretKeyRef) env[e.name] = "placeholder-secret-0123456789abcdef";
          else if (e.valueFrom?.fieldRef) env[e.name] = `${name}-pod`;
        }
        const parsed = parseEnv(schema, env, { exitOnError: false, service: name, warn: () => undefined }) as Record<string, unknown>;
        expect(parsed.HOST ?? "0.0.0.0", name).to.equal("0.0.0.0");
        const known = new Set([...Object.keys(schema.shape), "DB_USER", "DB_PASSWORD"]);
        expect(Object.keys(env).filter((k) => !known.has(k)), `${name}: variables it does not read`).to.deep.equal([]);
      }
    });

    it("routes only the gateway's public paths (not /metrics) and lets through the contract's largest body (16 MB)", () => {
      const ingress = one("Ingress", "gateway");
      const paths: Array<{ path: string; pathType: string }> = ingress.spec.rules[0].http.paths;
      const routed = (url: string) =>
        paths.some((p) => (p.pathType === "Exact" ? url === p.path : url === p.path || url.startsWith(`${p.path}/`)));
      for (const url of ["/api/v1/messages", "/api-reference", "/api-reference/openapi.json", "/admin/v1/organizations", "/provider/webhooks", "/console/", "/healthz", "/readyz"]) {
        expect(routed(url), url).to.equal(true);
      }
      for (const url of ["/metrics", "/", "/metricsx", "/internal"]) expect(routed(url), url).to.equal(false);
      expect((ingress.metadata as { annotations?: Record<string, string> }).annotations?.["nginx.ingress.kubernetes.io/proxy-body-size"]).to.equal("16m");
    });

    it("keeps every role's Postgres connections at its HPA maximum plus a rollout's surge under its connectionLimit, and their sum under max_connections", () => {
      const cluster = one("Cluster", "postgres");
      const limitOf = (role: string) => cluster.spec.managed.roles.find((r: any) => r.name === role).connectionLimit as number;
      let total = 0;
      for (const [name, role] of Object.entries(SERVICES)) {
        const replicas = one("HorizontalPodAutoscaler", name).spec.maxReplicas + deployment(name).spec.strategy.rollingUpdate.maxSurge;
        const connections = replicas * DB_CONNECTIONS_PER_REPLICA[name];
        expect(connections, `${name}: ${replicas} replicas × ${DB_CONNECTIONS_PER_REPLICA[name]} connections`).to.be.at.most(limitOf(role));
        total += connections;
      }
      expect(total + POSTGRES_RESERVED_CONNECTIONS, "every role at its maximum").to.be.at.most(Number(cluster.spec.postgresql.parameters.max_connections));
    });

    it("gives every service its own database role, managed by the Postgres Cluster and created in roles.sql", () => {
      const cluster = one("Cluster", "postgres");
      const roles = cluster.spec.managed.roles.map((r: any) => r.name);
      expect(roles.sort()).to.deep.equal(Object.values(SERVICES).sort());
      for (const r of cluster.spec.managed.roles) expect(r.passwordSecret.name).to.equal(`postgres-role-${r.name.replace(/_/g, "-")}`);
      const sql = readFileSync(path.join(REPO_ROOT, "k8s/base/postgres/roles.sql"), "utf8");
      const listed = /ARRAY\[([^\]]+)\]/.exec(sql)![1].split(",").map((s) => s.trim().replace(/'/g, ""));
      expect(listed.sort()).to.deep.equal(Object.values(SERVICES).sort());
      expect(one("ConfigMap", "postgres-roles").data["roles.sql"]).to.equal(sql);
    });

    if (overlay === "prod") {
      it("runs at least 2 replicas of every service and 3 gateways, 3 NATS nodes with streams at 3 replicas, 3 Postgres instances", () => {
        for (const name of Object.keys(SERVICES)) {
          const want = name === "gateway" ? 3 : 2;
          expect(deployment(name).spec.replicas, name).to.be.at.least(want);
          const hpa = one("HorizontalPodAutoscaler", name);
          expect(hpa.spec.minReplicas, name).to.be.at.least(want);
          expect(hpa.spec.maxReplicas, name).to.be.greaterThan(hpa.spec.minReplicas);
        }
        expect(one("ConfigMap", "platform-config").data.BUS_STREAM_REPLICAS).to.equal("3");
        expect(one("StatefulSet", "nats").spec.replicas).to.equal(3);
        const natsConf = all("ConfigMap").find((c) => c.metadata.name.startsWith("nats-config"))!.data["nats.conf"];
        expect(natsConf).to.match(/cluster\s*{/);
        expect(one("Cluster", "postgres").spec.instances).to.equal(3);
        expect(objects.some((o) => o.metadata.name === "provider-simulator")).to.equal(false);
      });
    } else {
      it("runs one replica of everything, small requests, and the provider simulator as the provider", () => {
        for (const d of all("Deployment")) expect(d.spec.replicas, d.metadata.name).to.equal(1);
        for (const name of Object.keys(SERVICES)) expect(container(name).resources.requests.cpu, name).to.equal("50m");
        expect(one("StatefulSet", "nats").spec.replicas).to.equal(1);
        expect(one("ConfigMap", "platform-config").data.BUS_STREAM_REPLICAS).to.equal("1");
        expect(one("Cluster", "postgres").spec.instances).to.equal(1);
        expect(one("ConfigMap", "messaging-config").data.PROVIDER_BASE_URL).to.equal("http://provider-simulator:8080");
      });
    }
  });
}
