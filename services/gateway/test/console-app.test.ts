import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import request from "supertest";
import { CONSOLE_CSP, findConsoleDist } from "../src/routes/console_app";
import { GatewayHarness } from "./harness";

/** `/console`: the built single-page app (packages/console), served offline with a self-only CSP. */
describe("gateway: the console page", () => {
  const h = new GatewayHarness();
  before(() => h.start());
  after(() => h.stop());

  const dist = findConsoleDist();
  const asset = () => readdirSync(join(dist!, "assets")).find((f) => f.endsWith(".js"))!;

  it("is built (npm run build) and found", () => {
    expect(dist, "packages/console is built").to.be.a("string");
    expect(asset()).to.match(/^index-[\w-]+\.js$/);
  });

  it("answers index.html for /console/ and every client route, never cached, with the self-only CSP", async () => {
    for (const path of ["/console/", "/console/settings", "/console/webhooks", "/console/accept", "/console/a/b?x=1"]) {
      const res = await request(h.url).get(path);
      expect(res.status, path).to.equal(200);
      expect(res.headers["content-type"]).to.match(/^text\/html/);
      expect(res.text, path).to.contain('<div id="root"></div>').and.contain(`/console/assets/${asset()}`);
      expect(res.headers["cache-control"]).to.equal("no-cache");
      expect(res.headers["content-security-policy"]).to.equal(CONSOLE_CSP);
      expect(res.headers["x-content-type-options"]).to.equal("nosniff");
      expect(res.headers["x-frame-options"]).to.equal("DENY");
    }
    // The page itself has no inline script or style for the CSP to refuse, and names no other host.
    const page = await request(h.url).get("/console/");
    expect(page.text).to.not.match(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).to.not.match(/<style|https?:\/\//);
  });

  it("redirects /console to /console/ keeping the query", async () => {
    const res = await request(h.url).get("/console?next=1");
    expect(res.status).to.equal(308);
    expect(res.headers.location).to.equal("/console/?next=1");
  });

  it("serves hashed assets as immutable for a year, and a missing asset is the 404 envelope (not the page)", async () => {
    const res = await request(h.url).get(`/console/assets/${asset()}`);
    expect(res.status).to.equal(200);
    expect(res.headers["content-type"]).to.match(/javascript/);
    expect(res.headers["cache-control"]).to.equal("public, max-age=31536000, immutable");
    const missing = await request(h.url).get("/console/assets/index-missing.js");
    expect(missing.status).to.equal(404);
    expect(missing.body.error.code).to.equal("NOT_FOUND");
  });

  it("never answers the page for /console/api paths", async () => {
    const unknown = await request(h.url).get("/console/api/nothing-here");
    expect(unknown.status).to.equal(401);
    expect(unknown.body.error.code).to.equal("UNAUTHORIZED");
    expect(unknown.headers["content-type"]).to.match(/json/);
  });
});
