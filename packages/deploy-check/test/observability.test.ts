import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { expect } from "chai";
import { parse, parseAllDocuments } from "yaml";
import { createMetrics, PLATFORM_METRICS } from "@platform/http";
import { REPO_ROOT } from "../src/render";

/**
 * k8s/observability: the alert rules and the dashboard query only metrics that exist — those a service's
 * registry (@platform/http createMetrics) exposes, the platform's own (PLATFORM_METRICS, which test-e2e's
 * metrics test finds on the running services), plus `up` (Prometheus) and kube-state-metrics' restart counter.
 * A metric is named in a query as `name{…}` (the convention these files keep, so this check can find them).
 */
const EXTERNAL = ["up", "kube_pod_container_status_restarts_total"];
const dir = path.join(REPO_ROOT, "k8s/observability");
const metricNames = (expr: string) => [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)].map((m) => m[1]);

describe("k8s/observability: alert rules and dashboard over the metrics that exist", () => {
  let known: Set<string>;

  before(async () => {
    const metrics = createMetrics("deploy-check");
    const names = (await metrics.registry.getMetricsAsJSON()).flatMap((m) =>
      String(m.type) === "histogram" ? [m.name, `${m.name}_bucket`, `${m.name}_count`, `${m.name}_sum`] : [m.name],
    );
    const platform = Object.values(PLATFORM_METRICS).flatMap((list) => list.flatMap((n) => [n, `${n}_bucket`, `${n}_count`, `${n}_sum`]));
    known = new Set([...names, ...platform, ...EXTERNAL]);
  });

  it("has alert rules whose every expression names existing metrics and a severity", () => {
    const rules = parse(readFileSync(path.join(dir, "alerts.rules.yaml"), "utf8")).groups.flatMap((g: any) => g.rules);
    expect(rules.length).to.be.greaterThan(4);
    for (const r of rules) {
      const names = metricNames(r.expr);
      expect(names, r.alert).to.not.be.empty;
      for (const n of names) expect(known.has(n), `${r.alert}: ${n}`).to.equal(true);
      expect(["page", "ticket"]).to.include(r.labels.severity);
      expect(r.annotations.summary, r.alert).to.be.a("string");
    }
    const runbook = readFileSync(path.join(REPO_ROOT, "docs/operations.md"), "utf8");
    for (const r of rules) expect(runbook, `docs/operations.md tells what to do for ${r.alert}`).to.include(r.alert);
  });

  it("alerts on consumer lag, outbox age, webhook deactivations, provider errors, 5xx and pod restarts", () => {
    const rules = parse(readFileSync(path.join(dir, "alerts.rules.yaml"), "utf8")).groups.flatMap((g: any) => g.rules);
    const queried = (metric: string) => rules.filter((r: any) => metricNames(r.expr).includes(metric)).map((r: any) => r.alert);
    for (const metric of [
      "bus_consumer_pending",
      "outbox_oldest_age_seconds",
      "webhook_deactivations_total",
      "provider_calls_total",
      "http_request_duration_seconds_count",
      "kube_pod_container_status_restarts_total",
    ]) {
      expect(queried(metric), `an alert on ${metric}`).to.not.be.empty;
    }
    expect(rules.find((r: any) => r.alert === "MessagingHigh5xxRate").expr).to.include('status=~"5.."');
  });

  it("has a dashboard panel for every platform metric", () => {
    const dash = JSON.parse(readFileSync(path.join(dir, "dashboard.json"), "utf8"));
    const queried = new Set(dash.panels.flatMap((p: any) => p.targets.flatMap((t: any) => metricNames(t.expr))));
    const base = (n: string) => n.replace(/_(bucket|count|sum)$/, "");
    const covered = new Set([...queried].map((n) => base(n as string)));
    for (const n of Object.values(PLATFORM_METRICS).flat()) {
      if (n === "bus_handler_duration_seconds" || n === "webhook_attempt_duration_seconds" || n === "outbox_relay_active" || n === "outbox_published_total") continue;
      expect(covered.has(n), `a panel shows ${n}`).to.equal(true);
    }
  });

  it("has a dashboard whose every query names existing metrics", () => {
    const dash = JSON.parse(readFileSync(path.join(dir, "dashboard.json"), "utf8"));
    const exprs: string[] = dash.panels.flatMap((p: any) => p.targets.map((t: any) => t.expr));
    expect(exprs.length).to.be.greaterThan(5);
    for (const e of exprs) {
      const names = metricNames(e);
      expect(names, e).to.not.be.empty;
      for (const n of names) expect(known.has(n), n).to.equal(true);
    }
    expect(new Set(dash.panels.map((p: any) => p.id)).size).to.equal(dash.panels.length);
  });

  it("renders as ConfigMaps for Prometheus and Grafana", () => {
    const out = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
    const objects = parseAllDocuments(out).map((d) => d.toJS());
    expect(objects.map((o) => o.metadata.name).sort()).to.deep.equal(["messaging-platform-alerts", "messaging-platform-dashboard"]);
    expect(objects.find((o) => o.metadata.name === "messaging-platform-dashboard").metadata.labels.grafana_dashboard).to.equal("1");
  });
});
