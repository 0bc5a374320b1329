import { Writable } from "node:stream";
import { expect } from "chai";
import { createLogger, withRequestContext } from "../src";

describe("logging: request context", () => {
  it("adds the request id and organization to every line written inside a request context, across awaits", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(JSON.parse(chunk.toString()));
        cb();
      },
    });
    const log = createLogger("svc", "info", sink);
    log.info("outside");
    const ctx: { requestId: string; organizationId?: string } = { requestId: "req_1" };
    await withRequestContext(ctx, async () => {
      log.info("before auth");
      ctx.organizationId = "org_1";
      await new Promise((r) => setImmediate(r));
      log.info("after an await");
    });
    expect(lines.map((l) => [l.msg, l.service, l.requestId, l.organizationId])).to.deep.equal([
      ["outside", "svc", undefined, undefined],
      ["before auth", "svc", "req_1", undefined],
      ["after an await", "svc", "req_1", "org_1"],
    ]);
  });
});
