import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { expect } from "chai";
import { parse } from "yaml";
import { z } from "zod";
import { internalServiceEnv, parseEnv } from "@platform/config";
import { REPO_ROOT } from "../src/render";

/**
 * infra/docker-compose.yml (Docker is not available here to run it): every service of the platform is in it,
 * runs `node dist/index.js` from its folder of the image, hardened like the pods, and its environment (with
 * compose's `${VAR:-default}` defaults) parses with the service's own env schema.
 */
const SERVICES = ["gateway", "messaging", "contacts", "webhook-dispatcher", "template-jobs", "analytics"];
const interpolate = (v: string) => v.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1");

describe("infra/docker-compose.yml", () => {
  const compose = parse(readFileSync(path.join(REPO_ROOT, "infra/docker-compose.yml"), "utf8"), { merge: true });

  it("runs Postgres, NATS with JetStream, the simulator and every service from the repository's image", () => {
    expect(Object.keys(compose.services)).to.include.members(["postgres", "nats", "provider-simulator", ...SERVICES]);
    expect(compose.services.nats.command).to.include("-js");
    for (const name of SERVICES) {
      const s = compose.services[name];
      expect(s.build.dockerfile, name).to.equal("Dockerfile");
      expect(s.working_dir, name).to.equal(`/app/services/${name}`);
      expect(s.command.at(-1), name).to.equal("dist/index.js");
      expect(s.read_only, name).to.equal(true);
      expect(s.cap_drop, name).to.deep.equal(["ALL"]);
      expect(s.depends_on.postgres.condition, name).to.equal("service_healthy");
    }
    expect(Object.entries(compose.services).filter(([, s]: [string, any]) => (s.ports ?? []).length > 0).map(([n]) => n).sort()).to.deep.equal(["gateway", "nats", "postgres"]);
  });

  it("gives every built service an environment its own schema accepts", () => {
    for (const name of SERVICES.filter((n) => existsSync(path.join(REPO_ROOT, "services", n, "dist/env.js")))) {
      const mod = require(path.join(REPO_ROOT, "services", name, "dist/env.js")) as { envSchema?: z.ZodObject<z.ZodRawShape>; envShape?: z.ZodRawShape };
      const schema = mod.envSchema ?? z.object({ ...internalServiceEnv, ...mod.envShape });
      const env = Object.fromEntries(Object.entries(compose.services[name].environment as Record<string, string>).map(([k, v]) => [k, interpolate(String(v))]));
      const parsed = parseEnv(schema, env, { exitOnError: false, service: name, warn: () => undefined }) as Record<string, unknown>;
      expect(parsed.DATABASE_URL, name).to.match(/@postgres:5432\//);
      expect(parsed.NATS_URL, name).to.equal("nats://nats:4222");
      // OTEL_* are read by the OpenTelemetry SDK that @platform/telemetry starts, not by the service's own schema.
      const unread = Object.keys(env).filter((k) => !(k in schema.shape) && !k.startsWith("OTEL_"));
      expect(unread, `${name}: variables it does not read`).to.deep.equal([]);
    }
  });
});
