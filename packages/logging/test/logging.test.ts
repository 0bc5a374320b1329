import { Writable } from "node:stream";
import { expect } from "chai";
import { createLogger } from "../src";

describe("logging", () => {
  it("writes one JSON object per line with the service, level name and ISO time, and redacts secrets", () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const log = createLogger("svc", "info", sink);
    log.info({ secret: "whsec_abc", webhook: { secret: "s2" }, webhookId: "wh_1" }, "webhook created");
    log.debug("not at info");
    expect(lines).to.have.length(1);
    const rec = JSON.parse(lines[0]);
    expect(rec).to.include({ service: "svc", level: "info", msg: "webhook created", webhookId: "wh_1", secret: "[redacted]" });
    expect(rec.webhook.secret).to.equal("[redacted]");
    expect(rec.time).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });
});
