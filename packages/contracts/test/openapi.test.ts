import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect } from "chai";
import { buildOpenApiDocument, ErrorCode, statusForCode } from "../src";

describe("OpenAPI document", () => {
  const doc = buildOpenApiDocument() as any;

  it("describes every /api/v1 operation with responses and the error envelope", () => {
    // Any request can be unreadable, carry a body that is not JSON (GET included) or be over the size limits.
    expect(doc.paths["/api/v1/ping"].get.responses).to.have.keys("200", "400", "401", "413", "429", "503");
    expect(doc.paths["/api/v1/contacts"].get.responses["400"].description).to.include("`INVALID_JSON`");
    expect(doc.paths["/api/v1/analytics"].get.responses).to.include.keys("400", "413");
    expect(doc.paths["/api/v1/messages"].post.responses).to.include.keys("200", "400", "401", "402", "403", "404", "409", "413", "422", "429");
    expect(doc.paths["/api/v1/contacts"].get.parameters.map((p: { name: string }) => p.name)).to.include.members(["limit", "cursor"]);
    expect(doc.components.schemas.Error).to.be.an("object");
    expect(doc.paths["/api/v1/templates/send"].post.responses).to.include.keys("200", "400", "402", "403", "404", "409", "413", "422");
    // A malformed job id is 400; a body sent to cancel is read like any other (invalid JSON 400, over 1 MB 413).
    expect(doc.paths["/api/v1/templates/send/{jobId}"].get.responses).to.include.keys("200", "400", "404");
    expect(doc.paths["/api/v1/templates/send/{jobId}/cancel"].post.responses).to.include.keys("200", "400", "404", "413");
    expect(doc.paths["/api/v1/templates"].get.parameters.map((p: { name: string }) => p.name)).to.include.members(["limit", "cursor"]);
    expect(doc.components.schemas.TemplateSendRequest.properties.recipients.maxItems).to.equal(50_000);
  });

  it("lists both opt-out actions (the original schema's omission is fixed)", () => {
    expect(doc.components.schemas.OptOutRequest.properties.action.enum).to.deep.equal(["set", "clear"]);
  });

  it("lints clean under redocly's recommended rules", function () {
    this.timeout(60_000);
    const dir = mkdtempSync(path.join(tmpdir(), "openapi-"));
    const file = path.join(dir, "openapi.json");
    writeFileSync(file, JSON.stringify(doc));
    const root = path.resolve(__dirname, "../../..");
    const run = spawnSync(process.execPath, [path.join(root, "node_modules/@redocly/cli/bin/cli.js"), "lint", file], { encoding: "utf8" });
    const output = `${run.stdout}${run.stderr}`;
    expect(run.status, output).to.equal(0);
    expect(output).to.not.match(/\d+ warnings?/);
  });
});

describe("error codes", () => {
  it("maps every code to a 4xx/5xx status", () => {
    for (const code of ErrorCode.options) expect(statusForCode(code)).to.be.within(400, 599);
    expect(statusForCode("UNAUTHORIZED")).to.equal(401);
    expect(statusForCode("IDEMPOTENCY_KEY_REUSED")).to.equal(422);
    expect(statusForCode("RATE_LIMITED")).to.equal(429);
  });
});
