import { expect } from "chai";
import { z } from "zod";
import { baseEnv, ConfigError, envBoolean, envIntList, envPort, internalServiceEnv, parseEnv } from "../src";

describe("parseEnv", () => {
  const schema = z.object({ ...baseEnv, FLAG: envBoolean(false), DELAYS: envIntList("5,10", 1_000), TOKEN: z.string().min(16) });

  it("applies the contract defaults", () => {
    const env = parseEnv(schema, { TOKEN: "x".repeat(16) }, { exitOnError: false });
    expect(env.DATABASE_URL).to.equal("postgres://postgres@127.0.0.1:5432/messaging");
    expect(env.NATS_URL).to.equal("nats://127.0.0.1:4222");
    expect(env.FLAG).to.equal(false);
    expect(env.BUS_STREAM_REPLICAS).to.equal(1);
    expect(parseEnv(schema, { TOKEN: "x".repeat(16), BUS_STREAM_REPLICAS: "3" }, { exitOnError: false }).BUS_STREAM_REPLICAS).to.equal(3);
    expect(parseEnv(z.object(internalServiceEnv), { INTERNAL_TOKEN: "x".repeat(16) }, { exitOnError: false }).HOST).to.equal("127.0.0.1");
    expect(env.DELAYS).to.deep.equal([5, 10]);
  });

  it("reads 'false' as false", () => {
    expect(parseEnv(schema, { TOKEN: "x".repeat(16), FLAG: "false" }, { exitOnError: false }).FLAG).to.equal(false);
    expect(parseEnv(schema, { TOKEN: "x".repeat(16), FLAG: "true" }, { exitOnError: false }).FLAG).to.equal(true);
  });

  it("reports one readable line per bad or missing variable", () => {
    try {
      parseEnv(schema, { DATABASE_URL: "mysql://x", FLAG: "maybe", DELAYS: "1,,2" }, { exitOnError: false, service: "svc" });
      expect.fail("should throw");
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      const lines = (err as ConfigError).problems;
      expect(lines).to.have.length(4);
      expect(lines.find((l) => l.includes("TOKEN"))).to.match(/TOKEN is missing/);
      expect(lines.find((l) => l.includes("DATABASE_URL"))).to.match(/DATABASE_URL is invalid/);
      expect(lines.every((l) => l.startsWith("config error [svc]: "))).to.equal(true);
    }
  });

  it("reads a list of delays as decimal integers within its bound", () => {
    const delays = (DELAYS: string) => parseEnv(schema, { TOKEN: "x".repeat(16), DELAYS }, { exitOnError: false, service: "svc" }).DELAYS;
    expect(delays(" 0, 1000 ")).to.deep.equal([0, 1000]);
    for (const bad of ["1001", "1,0x10", "1e2", "-1", "1.5", "1,,2", " "]) {
      expect(() => delays(bad), bad).to.throw(ConfigError, "DELAYS is invalid: must be comma-separated integers from 0 to 1000");
    }
  });

  it("reads numbers as an operator writes them: blank, hex or an exponent is a bad variable, not 0, 256 or 1000", () => {
    const numbers = z.object({ PORT: envPort(8080), RATE: z.coerce.number().int().min(1).default(50), SHARE: z.coerce.number().min(0).max(1).default(0.5) });
    expect(parseEnv(numbers, { PORT: "8081", RATE: " 20 ", SHARE: "0.25" }, { exitOnError: false })).to.deep.equal({ PORT: 8081, RATE: 20, SHARE: 0.25 });
    expect(parseEnv(numbers, { SHARE: ".5" }, { exitOnError: false }).SHARE).to.equal(0.5);
    for (const [name, value] of [["PORT", " "], ["PORT", ""], ["PORT", "1e4"], ["RATE", "0x10"], ["RATE", "1e3"], ["SHARE", "0.5.1"]]) {
      try {
        parseEnv(numbers, { [name]: value }, { exitOnError: false, service: "svc" });
        expect.fail(`${name}=${JSON.stringify(value)} should be refused`);
      } catch (err) {
        expect(err, `${name}=${JSON.stringify(value)}`).to.be.instanceOf(ConfigError);
        expect((err as ConfigError).problems).to.deep.equal([`config error [svc]: ${name} is invalid: must be a decimal number`]);
      }
    }
    // Reported beside the other bad variables, once each.
    try {
      parseEnv(numbers, { PORT: "0x1f90", RATE: "0" }, { exitOnError: false, service: "svc" });
      expect.fail("should throw");
    } catch (err) {
      expect((err as ConfigError).problems).to.have.length(2);
    }
  });

  it("accepts an INTERNAL_TOKEN of any non-empty length and warns once when it is short", () => {
    const schema = z.object({ ...internalServiceEnv, EXTRA: z.string().default("x") });
    const warnings: string[] = [];
    const env = parseEnv(schema, { INTERNAL_TOKEN: "short" }, { exitOnError: false, service: "svc", warn: (l) => warnings.push(l) });
    expect(env.INTERNAL_TOKEN).to.equal("short");
    expect(warnings).to.deep.equal(["config warning [svc]: INTERNAL_TOKEN is shorter than 16 characters; use a long random value outside development"]);
    warnings.length = 0;
    parseEnv(schema, { INTERNAL_TOKEN: "x".repeat(16) }, { exitOnError: false, warn: (l) => warnings.push(l) });
    expect(warnings).to.deep.equal([]);
    expect(() => parseEnv(schema, { INTERNAL_TOKEN: "" }, { exitOnError: false, warn: (l) => warnings.push(l) })).to.throw(ConfigError, /INTERNAL_TOKEN is invalid: must not be empty/);
  });
});
