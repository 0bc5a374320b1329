import { mkdirSync } from "node:fs";
import { expect } from "chai";
import { chromium, type Browser } from "playwright-core";
import { E2E } from "./stack";

/** Debian's Chromium (`.ci/run` installs the `chromium` package when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/**
 * `/api-reference` in a real browser: the page, the bundled renderer and the served OpenAPI document come from the
 * gateway alone (any other host is refused, as offline), and the operations are drawn.
 */
describe("e2e: the API reference page in Chromium", function () {
  this.timeout(180_000);
  const e2e = new E2E();
  let browser: Browser;
  before(async () => {
    await e2e.start();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  });
  after(async () => {
    await browser?.close();
    await e2e.stop();
  });

  it("renders every /api/v1 operation from the served document, offline and without a key", async () => {
    const page = await browser.newPage();
    const origin = new URL(e2e.stack.url).origin;
    const outside: string[] = [];
    const fetched: string[] = [];
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith(origin) || url.startsWith("data:") || url.startsWith("blob:")) {
        fetched.push(url.slice(origin.length));
        return route.continue();
      }
      outside.push(url);
      return route.abort();
    });
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));

    const res = await page.goto(`${e2e.stack.url}/api-reference`);
    expect(res?.status()).to.equal(200);
    const summaries = [
      "Check that an API key works",
      "Send a text message",
      "List conversations",
      "List contacts",
      "Set or clear a per-channel opt-out",
      "Outbound message counts and rates for a date range",
      "List templates",
      "Queue a bulk template send job",
      "A template send job with its progress",
      "Cancel a template send job",
    ];
    for (const summary of summaries) await page.getByText(summary).first().waitFor({ state: "attached", timeout: 60_000 });
    await page.getByText("Business Messaging API").first().waitFor({ timeout: 30_000 });

    expect(fetched).to.include.members(["/api-reference", "/api-reference/api-reference.js", "/api-reference/openapi.json"]);
    expect(errors, errors.join("\n")).to.deep.equal([]);
    expect(outside, "requests that left the gateway").to.deep.equal([]);
    mkdirSync("test-results", { recursive: true });
    await page.screenshot({ path: "test-results/api-reference.png", fullPage: false });
    await page.close();
  });
});
