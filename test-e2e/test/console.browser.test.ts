import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { SubscribableEventType } from "@platform/contracts";
import { eventually } from "@platform/testing";
import { E2E } from "./stack";

/** Debian's Chromium (`.ci/run` installs the `chromium` package when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/**
 * As the machine's notes say for this closed network: no background connections, no component updates or sync.
 * playwright-core launches headless with a fresh temporary profile (`--user-data-dir`) of its own on every launch.
 */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];
const PASSWORD = "correct horse battery staple";
const SHOTS = "test-results";

/** A webhook endpoint whose answer the test switches (200 with a body, or 500). */
async function endpoint() {
  const state = { status: 200, hits: 0 };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      state.hits++;
      res.writeHead(state.status, { "Content-Type": "text/plain" }).end(state.status === 200 ? "received by the console test" : "endpoint broken");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * The console in Chromium against the whole stack (issue 15): an Owner signs in and sets the organization up through
 * the pages; a Member invited from the page is refused a key by the page and by the API; webhooks, opt-outs,
 * template jobs and analytics are driven and checked by their outcome (ids, states, counts), never by time.
 */
describe("e2e: the console in Chromium", function () {
  this.timeout(240_000);
  const e2e = new E2E();
  let browser: Browser;
  let owner: BrowserContext;
  let page: Page;
  let origin: string;
  let org: { id: string; email: string };
  const outside: string[] = [];
  const pageErrors: string[] = [];
  const shared: { channelId?: string; providerPhoneNumberId?: string; key?: string } = {};

  before(async () => {
    await e2e.start({ CONSOLE_SCRYPT_COST: "12", WEBHOOK_RETRY_DELAYS_MS: "20,20,20" });
    origin = new URL(e2e.stack.url).origin;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    mkdirSync(SHOTS, { recursive: true });
    const created = await e2e.admin("POST", "/admin/v1/organizations", { name: "Browser Org" });
    expect(created.status).to.equal(201);
    const email = `owner-${randomBytes(5).toString("hex")}@example.com`;
    // The first Owner, as the root README says: with the operator's admin token.
    const user = await e2e.admin("POST", `/admin/v1/organizations/${created.body.id}/users`, { email, password: PASSWORD, role: "owner" });
    expect(user.status, JSON.stringify(user.body)).to.equal(201);
    org = { id: created.body.id, email };
    owner = await newContext();
    page = await owner.newPage();
  });
  after(async () => {
    await browser?.close();
    await e2e.stop();
  });
  afterEach(function () {
    expect(pageErrors, "errors thrown in the page").to.deep.equal([]);
    expect(outside, "requests that left the gateway").to.deep.equal([]);
  });

  /** Every request must stay on the gateway (offline: the bundle carries everything). */
  async function newContext(): Promise<BrowserContext> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith(origin) || url.startsWith("data:") || url.startsWith("blob:")) return route.continue();
      outside.push(url);
      return route.abort();
    });
    context.on("page", (p) => p.on("pageerror", (err) => pageErrors.push(err.message)));
    return context;
  }

  async function signIn(p: Page, email: string) {
    await p.goto(`${e2e.stack.url}/console/`);
    await p.getByLabel("Email").fill(email);
    await p.getByLabel("Password").fill(PASSWORD);
    await p.getByRole("button", { name: "Sign in" }).click();
    await p.getByTestId("signed-in-as").filter({ hasText: email }).waitFor();
  }

  async function open(p: Page, label: string) {
    await p.getByRole("navigation").getByRole("link", { name: label, exact: true }).click();
    await p.getByRole("heading", { level: 1, name: label }).waitFor();
  }

  const shot = (p: Page, name: string) => p.screenshot({ path: `${SHOTS}/console-${name}.png`, fullPage: true });

  const consoleFetch = (p: Page, method: string, path: string, body?: unknown) =>
    p.evaluate(
      async ({ method, path, body }) => {
        const session = await fetch("/console/api/session");
        const { csrfToken } = (await session.json()) as { csrfToken: string };
        const res = await fetch(`/console/api${path}`, {
          method,
          headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json().catch(() => null)) as any };
      },
      { method, path, body },
    );

  it("signs an Owner in: the session cookie is HttpOnly, Secure, SameSite=Strict, and the settings show the plan read-only", async () => {
    await signIn(page, org.email);
    const [cookie] = (await owner.cookies()).filter((c) => c.name === "__Host-console-session");
    expect(cookie).to.include({ httpOnly: true, secure: true, sameSite: "Strict", path: "/" });
    expect(await page.evaluate("document.cookie")).to.equal("");
    await page.getByRole("heading", { level: 1, name: "Organization" }).waitFor();
    expect(await page.getByTestId("plan").textContent()).to.contain("growth");
    await page.getByLabel("Opt-out keywords").fill("STOP, BASTA");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    const read = await e2e.admin("GET", `/admin/v1/organizations/${org.id}`);
    expect(read.body.optOutKeywords).to.deep.equal(["STOP", "BASTA"]);
    // A field's own error message from the API, next to it.
    await page.getByLabel("Rate limit: burst").fill("0");
    await page.getByRole("button", { name: "Save settings" }).click();
    const err = page.getByLabel("Rate limit: burst").locator("xpath=..").getByTestId("field-error");
    await err.waitFor();
    expect(await err.textContent()).to.match(/1|small|least/i);
    await page.getByLabel("Rate limit: burst").fill("40");
    await shot(page, "settings");
  });

  it("connects a channel and creates an API key, shown once and working against /api/v1/ping", async () => {
    await open(page, "Channels");
    shared.providerPhoneNumberId = String(300_000_000 + Math.floor(Math.random() * 600_000_000));
    await page.getByLabel("Channel name").fill("Main");
    await page.getByLabel("Phone number", { exact: true }).fill("+15550100000");
    await page.getByLabel("Provider phone number id").fill(shared.providerPhoneNumberId);
    await page.getByLabel("Default channel").check();
    await page.getByRole("button", { name: "Connect channel" }).click();
    const row = page.getByTestId("channels").getByRole("row").filter({ hasText: shared.providerPhoneNumberId });
    await row.waitFor();
    expect(await row.textContent()).to.contain("default");
    const channels = await e2e.admin("GET", `/admin/v1/organizations/${org.id}/channels`);
    shared.channelId = channels.body.items[0].id;
    await shot(page, "channels");

    await open(page, "API keys");
    await page.getByLabel("Key name").fill("browser");
    await page.getByRole("button", { name: "Create key" }).click();
    const value = (await page.getByTestId("new-api-key-value").textContent())!;
    expect(value).to.match(/^svc_[0-9A-Za-z]{32,}$/);
    shared.key = value;
    const ping = await e2e.call("GET", "/api/v1/ping", { token: value });
    expect(ping.status).to.equal(200);
    expect(ping.body).to.deep.include({ ok: true, organizationId: org.id });
    await page.getByTestId("api-keys").getByRole("row").filter({ hasText: value.slice(0, 8) }).waitFor();
    await shot(page, "api-keys");
    // Shown once: after a reload the page has only the prefix.
    await page.reload();
    await page.getByTestId("api-keys").getByRole("row").filter({ hasText: "browser" }).waitFor();
    expect(await page.content()).to.not.contain(value);
  });

  it("invites a Member from the page; the Member cannot create a key: the page and the API both refuse", async () => {
    await open(page, "Users");
    const memberEmail = `member-${randomBytes(5).toString("hex")}@example.com`;
    await page.getByLabel("Email to invite").fill(memberEmail);
    await page.getByLabel("Role", { exact: true }).selectOption("member");
    await page.getByRole("button", { name: "Invite" }).click();
    const link = (await page.getByTestId("invitation-link-value").textContent())!;
    expect(link).to.match(/\/console\/accept#token=/);
    await shot(page, "users");

    const memberContext = await newContext();
    const member = await memberContext.newPage();
    await member.goto(link);
    await member.getByLabel("Choose a password").fill(PASSWORD);
    await member.getByRole("button", { name: "Accept invitation" }).click();
    await member.getByRole("heading", { name: "Invitation accepted" }).waitFor();
    await signIn(member, memberEmail);
    expect(await member.getByTestId("signed-in-as").textContent()).to.contain("member");
    await open(member, "API keys");
    expect(await member.getByRole("button", { name: "Create key" }).isDisabled()).to.equal(true);
    expect(await member.getByText("Your role (Member) can read this page").count()).to.equal(1);
    // The list is readable, with no revoke control.
    await member.getByTestId("api-keys").getByRole("row").filter({ hasText: "browser" }).waitFor();
    expect(await member.getByRole("button", { name: "Revoke" }).count()).to.equal(0);
    const refused = await consoleFetch(member, "POST", "/api-keys", { name: "sneaky" });
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal("FORBIDDEN");
    const keys = await e2e.admin("GET", `/admin/v1/organizations/${org.id}/api-keys`);
    expect(keys.body.items.map((k: { name: string }) => k.name)).to.not.include("sneaky");
    await memberContext.close();
  });

  it("creates a webhook (events from the spec's list, secret shown once), sends a test and sees the attempt; deactivated by failures, re-enabled", async () => {
    const hook = await endpoint();
    try {
      await open(page, "Webhooks");
      const boxes = page.getByRole("group", { name: "Events" }).getByRole("checkbox");
      expect(await boxes.count()).to.equal(SubscribableEventType.options.length);
      // An error from the API next to its field: no event chosen.
      await page.getByLabel("Endpoint URL").fill(hook.url);
      await page.getByRole("button", { name: "Create webhook" }).click();
      await page.getByRole("group", { name: "Events" }).getByTestId("field-error").waitFor();
      await page.getByRole("checkbox", { name: "message.received" }).check();
      await page.getByRole("button", { name: "Create webhook" }).click();
      const secret = (await page.getByTestId("new-webhook-secret-value").textContent())!;
      expect(secret).to.match(/^whsec_/);
      const card = page.getByRole("article", { name: `Webhook ${hook.url}` });
      await card.waitFor();

      await card.getByRole("button", { name: "Send test" }).click();
      const result = card.getByTestId("webhook-test-result");
      await result.waitFor();
      expect(await result.textContent()).to.contain("Test delivered").and.contain("response status 200");
      await card.getByRole("button", { name: "Show attempts" }).click();
      const attempt = card.getByTestId("attempt").filter({ hasText: "webhook.test" });
      await attempt.waitFor();
      expect(await attempt.textContent()).to.contain("200").and.contain("received by the console test");
      await shot(page, "webhooks");

      // The endpoint breaks; inbound messages make events whose attempts (4 each) fail until the webhook is deactivated.
      hook.state.status = 500;
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${e2e.stack.simulatorUrl}/_sim/inbound`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ phoneNumberId: shared.providerPhoneNumberId, from: "15550003333", text: `hello ${i}` }),
        });
        expect(res.status).to.be.within(200, 299);
      }
      await eventually(async () => {
        const hooks = await e2e.admin("GET", `/admin/v1/organizations/${org.id}/webhooks`);
        return hooks.body.items?.[0]?.active === false || undefined;
      }, 60_000);
      await page.reload();
      const state = card.getByTestId("webhook-state");
      await state.filter({ hasText: "deactivated" }).waitFor();
      expect(Number(await card.getByTestId("webhook-failures").textContent())).to.be.at.least(10);
      await card.getByRole("button", { name: "Show attempts" }).click();
      await card.getByTestId("attempt").filter({ hasText: "message.received" }).filter({ hasText: "500" }).first().waitFor();
      await shot(page, "webhooks-deactivated");

      hook.state.status = 200;
      await card.getByRole("button", { name: "Re-enable" }).click();
      await state.filter({ hasText: /^active$/ }).waitFor();
      expect(await card.getByTestId("webhook-failures").textContent()).to.equal("0");
      const hooks = await e2e.admin("GET", `/admin/v1/organizations/${org.id}/webhooks`);
      expect(hooks.body.items[0]).to.include({ active: true, consecutiveFailures: 0, deactivatedAt: null });
    } finally {
      await hook.close();
    }
  });

  it("adds an opt-out by hand; a send to that number is refused; the look-up shows it and clears it", async () => {
    await open(page, "Opt-outs");
    await page.getByLabel("Channel", { exact: true }).selectOption(shared.channelId!);
    await page.getByLabel("Phone number", { exact: true }).fill("not a phone");
    await page.getByRole("button", { name: "Add opt-out" }).click();
    const err = page.getByRole("form", { name: "Add an opt-out" }).getByTestId("field-error");
    await err.waitFor();
    expect(await err.textContent()).to.contain("not a valid phone number");

    await page.getByLabel("Phone number", { exact: true }).fill("+15550007777");
    await page.getByLabel("Reason (optional)").fill("asked by phone");
    await page.getByRole("button", { name: "Add opt-out" }).click();
    const row = page.getByTestId(`opt-out-${shared.channelId}`);
    await row.getByTestId("opt-out-state").filter({ hasText: "opted out" }).waitFor();
    expect(await row.textContent()).to.contain("manual").and.contain("asked by phone");
    await shot(page, "opt-outs");

    const blocked = await e2e.call("POST", "/api/v1/messages", { token: shared.key, body: { to: "+15550007777", text: "hello" } });
    expect(blocked.status).to.equal(403);
    expect(blocked.body.error.code).to.equal("CONTACT_OPTED_OUT");

    await page.getByLabel("Phone number to look up").fill("15550007777");
    await page.getByRole("button", { name: "Look up" }).click();
    await row.getByRole("button", { name: "Clear" }).click();
    await row.getByTestId("opt-out-state").filter({ hasText: "cleared" }).waitFor();
    const lookup = await consoleFetch(page, "GET", "/opt-outs?phone=%2B15550007777");
    expect(lookup.body.items[0]).to.include({ active: false, messagingChannelId: shared.channelId });
    // Opted out again for the template job below (a skipped recipient).
    await page.getByLabel("Phone number", { exact: true }).fill("+15550007777");
    await page.getByRole("button", { name: "Add opt-out" }).click();
    await row.getByTestId("opt-out-state").filter({ hasText: "opted out" }).waitFor();
  });

  it("watches a template job's progress to the end (polling), and cancels a scheduled one", async () => {
    await open(page, "Templates");
    const providerTemplateId = String(5_000_000 + Math.floor(Math.random() * 1e9));
    await page.getByLabel("Template name").fill("order_update");
    await page.getByLabel("Status", { exact: true }).selectOption("approved");
    await page.getByLabel("Body parameters").fill("1");
    await page.getByLabel("Provider template id").fill(providerTemplateId);
    await page.getByLabel("Template account id").fill("waba_browser");
    await page.getByRole("button", { name: "Register template" }).click();
    await page.getByTestId("templates").getByRole("row").filter({ hasText: providerTemplateId }).waitFor();
    await shot(page, "templates");

    await open(page, "Template jobs");
    const form = page.getByRole("form", { name: "Send a template in bulk" });
    await form.getByLabel("Template").selectOption({ label: "order_update (en_US, approved)" });
    await form.getByLabel("Channel").selectOption(shared.channelId!);
    // A recipient without its parameter: the API's message, next to the recipients.
    await form.getByLabel("Recipients").fill("+15550004444");
    await form.getByRole("button", { name: "Queue job" }).click();
    await form.getByTestId("field-error").waitFor();
    await form.getByLabel("Recipients").fill("+15550004444, Ann\n+15550005555, Bob\n+15550007777, Opted");
    await form.getByRole("button", { name: "Queue job" }).click();
    const jobs = await eventually(async () => {
      const list = await consoleFetch(page, "GET", "/template-jobs");
      return list.body.items?.length === 1 ? list.body.items : undefined;
    });
    const row = page.getByTestId(`job-${jobs[0].id}`);
    // The page polls while the job runs: no reload, the row reaches its final state by itself.
    await page.locator(`[data-testid="job-${jobs[0].id}"][data-status="completed"]`).waitFor({ timeout: 90_000 });
    expect(await row.getByTestId("job-progress").textContent()).to.equal("3/3");
    expect(await row.textContent()).to.match(/completed/);
    const final = await e2e.call("GET", `/api/v1/templates/send/${jobs[0].id}`, { token: shared.key });
    expect(final.body).to.include({ status: "completed", recipients: 3, sent: 2, skipped: 1, failed: 0 });
    await shot(page, "template-jobs");

    const tomorrow = new Date(Date.now() + 24 * 3600_000);
    const local = new Date(tomorrow.getTime() - tomorrow.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await form.getByLabel("Recipients").fill("+15550006666, Later");
    await form.getByLabel("Schedule for (optional)").fill(local);
    await form.getByRole("button", { name: "Queue job" }).click();
    const scheduled = await eventually(async () => {
      const list = await consoleFetch(page, "GET", "/template-jobs");
      return list.body.items?.length === 2 ? list.body.items[0] : undefined;
    });
    expect(scheduled.status).to.equal("queued");
    await page.getByTestId(`job-${scheduled.id}`).getByRole("button", { name: "Cancel" }).click();
    await page.locator(`[data-testid="job-${scheduled.id}"][data-status="cancelled"]`).waitFor();
    await page.getByTestId("polling").filter({ hasText: "All jobs are finished." }).waitFor();
  });

  it("draws the analytics chart for a range with data: counts by status per day and the three rates", async () => {
    await open(page, "Analytics");
    const chart = page.getByTestId("analytics-chart");
    // Analytics is built from events: show the range again until the two sends of the job are counted.
    await eventually(async () => {
      await page.getByRole("button", { name: "Show" }).click();
      await chart.and(page.locator('[data-drawn="true"]')).waitFor();
      return Number(await chart.getAttribute("data-total")) >= 2 || undefined;
    }, 60_000, 500);
    expect(await chart.getAttribute("data-days")).to.equal("7");
    expect(Number(await page.getByTestId("analytics-total").textContent())).to.be.at.least(2);
    for (const rate of ["delivery-rate", "read-rate", "failure-rate"]) expect(await page.getByTestId(rate).textContent()).to.match(/^\d+\.\d%$/);
    // Drawn: the canvas has pixels.
    const painted = await chart.locator("canvas").evaluate((c: any) => {
      const d: Uint8ClampedArray = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
      return n;
    });
    expect(painted).to.be.greaterThan(1000);
    // A range the API refuses: its message next to the field.
    await page.getByLabel("From (UTC day)").fill("2026-12-31");
    await page.getByLabel("To (UTC day, inclusive)").fill("2026-01-01");
    await page.getByRole("button", { name: "Show" }).click();
    await page.getByRole("form", { name: "Analytics range" }).getByTestId("field-error").waitFor();
    await page.getByLabel("From (UTC day)").fill(new Date(Date.now() - 6 * 86_400_000).toISOString().slice(0, 10));
    await page.getByLabel("To (UTC day, inclusive)").fill(new Date().toISOString().slice(0, 10));
    await page.getByRole("button", { name: "Show" }).click();
    await chart.and(page.locator('[data-drawn="true"]')).waitFor();
    await shot(page, "analytics");

    await open(page, "Conversations");
    await page.getByTestId("conversations").getByRole("row").filter({ hasText: "+15550003333" }).waitFor();
    await shot(page, "conversations");
  });

  it("signs out: the session is gone and the sign-in form is back", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    const session = await page.evaluate(async () => (await fetch("/console/api/session")).status);
    expect(session).to.equal(401);
    expect((await owner.cookies()).filter((c) => c.name === "__Host-console-session")).to.deep.equal([]);
  });
});
