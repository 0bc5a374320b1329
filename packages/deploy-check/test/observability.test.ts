import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { expect } from "chai";
import { parse, parseAllDocuments } from "yaml";
import { createMetrics } from "@platform/http";
import { REPO_ROOT } from "../src/render";

/**
 * k8s/observability: the alert rules and the dashboard query only metrics that exist today — those a service's
 * registry (@platform/http createMetrics) exposes, plus `up` (Prometheus) and kube-state-metrics' restart counter.
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
    known = new Set([...names, ...EXTERNAL]);
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
