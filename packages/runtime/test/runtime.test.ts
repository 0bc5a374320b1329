import { expect } from "chai";
import { createLogger } from "@platform/logging";
import { Lifecycle, waitFor } from "../src";

const log = createLogger("runtime-test", "silent");

describe("runtime", () => {
  it("waitFor retries a failing startup step until it succeeds", async () => {
    let calls = 0;
    const value = await waitFor(
      "flaky",
      async () => {
        calls++;
        if (calls < 3) throw new Error("not yet");
        return "up";
      },
      log,
    );
    expect(value).to.equal("up");
    expect(calls).to.equal(3);
  });

  it("Lifecycle closes in reverse order of registration and survives a failing closer", async () => {
    const order: string[] = [];
    const life = new Lifecycle(log);
    life.onStop("db", () => {
      order.push("db");
    });
    life.onStop("broken", () => {
      throw new Error("x");
    });
    life.onStop("http", async () => {
      order.push("http");
    });
    await life.stop();
    expect(order).to.deep.equal(["http", "db"]);
  });
});
