import { expect } from "chai";
import { ConfigError, parseEnv } from "@platform/config";
import { envSchema } from "../src/env";

describe("gateway: environment", () => {
  const parse = (env: Record<string, string>) => {
    const warnings: string[] = [];
    const parsed = parseEnv(envSchema, env, { exitOnError: false, service: "gateway", warn: (line) => warnings.push(line) });
    return { parsed, warnings };
  };

  it("accepts tokens of any length, such as ADMIN_TOKEN=test-admin, with one warning line per short token", () => {
    const { parsed, warnings } = parse({ ADMIN_TOKEN: "test-admin", INTERNAL_TOKEN: "int" });
    expect(parsed.ADMIN_TOKEN).to.equal("test-admin");
    expect(parsed.INTERNAL_TOKEN).to.equal("int");
    expect(warnings).to.deep.equal([
      "config warning [gateway]: ADMIN_TOKEN is shorter than 16 characters; use a long random value outside development",
      "config warning [gateway]: INTERNAL_TOKEN is shorter than 16 characters; use a long random value outside development",
    ]);
  });

  it("says nothing about tokens of 16 characters or more", () => {
    const { warnings } = parse({ ADMIN_TOKEN: "a".repeat(16), INTERNAL_TOKEN: "i".repeat(40) });
    expect(warnings).to.deep.equal([]);
  });

  it("refuses an empty or missing token with one readable line each", () => {
    try {
      parse({ ADMIN_TOKEN: "" });
      expect.fail("should throw");
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      expect((err as ConfigError).problems).to.deep.equal([
        "config error [gateway]: ADMIN_TOKEN is invalid: must not be empty",
        "config error [gateway]: INTERNAL_TOKEN is missing: Invalid input: expected string, received undefined",
      ]);
    }
  });
});
