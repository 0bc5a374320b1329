import dns from "node:dns";
import os from "node:os";
import { expect } from "chai";
import { Client } from "pg";
import { eventually, newId, Receiver, startStack, type Stack } from "./helpers";

/** WEBHOOK_ALLOW_PRIVATE_TARGETS off, as in production. No traffic ever leaves loopback: refusals happen before connecting. */
describe("SSRF protection (private targets refused)", () => {
  let stack: Stack;
  let receiver: Receiver;
  let connections = 0;

  before(async () => {
    stack = await startStack("whd_ssrf", { WEBHOOK_ALLOW_PRIVATE_TARGETS: "false" });
    receiver = await Receiver.start();
    (receiver as unknown as { server: import("node:http").Server }).server.on("connection", () => connections++);
  });
  after(async () => {
    await receiver.close();
    await stack.stop();
  });

  const refused = [
    "http://127.0.0.1/hook",
    "https://127.0.0.1/hook",
    "https://10.0.0.1/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]/hook",
    "https://localhost/hook",
    "https://api.localhost/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:a9fe:a9fe]/hook",
    "https://172.16.5.4/hook",
    "https://192.168.1.10/hook",
    "https://100.64.0.1/hook",
    "https://0.0.0.0/hook",
    "https://[fd00:ec2::254]/hook",
    "https://[fe80::1]/hook",
    "https://metadata.google.internal/computeMetadata/v1/",
    "http://example.com/hook",
  ];
  for (const url of refused) {
    it(`refuses ${url} at creation with 400 VALIDATION_ERROR on url`, async () => {
      const org = newId("organization");
      const res = await stack.admin(org).post("", { url, events: ["message.sent"] }).expect(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details[0].path).to.equal("url");
      expect((await stack.admin(org).get("")).body.items).to.have.length(0);
    });
  }

  it("refuses a hostname that resolves (through DNS, not by its name) to loopback", async function () {
    // A name no name rule knows that resolves to loopback here (/etc/hosts): the machine's own name, or Debian's ip6 aliases.
    const loopback = (a: { address: string }) => a.address.startsWith("127.") || a.address === "::1";
    let host: string | undefined;
    for (const candidate of [os.hostname(), "ip6-localhost", "ip6-loopback"]) {
      const addresses = await dns.promises.lookup(candidate, { all: true }).catch(() => []);
      if (addresses.length && addresses.every(loopback)) {
        host = candidate;
        break;
      }
    }
    if (!host) throw new Error("no name resolves to loopback on this machine (tried the hostname, ip6-localhost, ip6-loopback)");
    const org = newId("organization");
    const res = await stack.admin(org).post("", { url: `https://${host}:8443/hook`, events: ["message.sent"] }).expect(400);
    expect(res.body.error.details[0]).to.deep.include({ path: "url" });
    expect(res.body.error.details[0].message).to.match(/loopback/);
  });

  it("accepts a public https URL, and refuses changing it to a private one", async () => {
    const org = newId("organization");
    // A public address literal: accepted without DNS; no event of this organization is ever published.
    const created = await stack.admin(org).post("", { url: "https://93.184.215.14/hook", events: ["message.sent"] }).expect(201);
    const res = await stack.admin(org).patch(`/${created.body.id}`, { url: "https://127.0.0.1/x" }).expect(400);
    expect(res.body.error.details[0].path).to.equal("url");
    expect((await stack.admin(org).get("")).body.items[0].url).to.equal("https://93.184.215.14/hook");
    await stack.admin(org).del(`/${created.body.id}`).expect(204);
  });

  it("checks again at delivery, on the resolved address (a name that now resolves to loopback, an IP literal): never connects", async () => {
    const org = newId("organization");
    const port = new URL(receiver.url).port;
    // As if the names had resolved to public addresses at creation and been rebound since.
    const ids = [newId("webhook"), newId("webhook")];
    const pg = new Client({ connectionString: stack.env.databaseUrl });
    await pg.connect();
    try {
      await pg.query(
        `INSERT INTO webhooks.webhooks (id, organization_id, url, events, secret) VALUES
           ($1, $3, $4, '{message.sent}', 'whsec_AAAA'), ($2, $3, $5, '{message.sent}', 'whsec_AAAA')`,
        [ids[0], ids[1], org, `https://localhost:${port}/rebound`, `https://127.0.0.1:${port}/literal`],
      );
    } finally {
      await pg.end();
    }
    const before = connections;
    const eventId = await stack.publish("message.sent", org);
    for (const id of ids) {
      const items = await eventually(async () => {
        const l = (await stack.admin(org).get(`/${id}/deliveries`).expect(200)).body.items;
        return l.length >= 1 ? l : undefined;
      });
      expect(items.at(-1)).to.include({ eventId, attempt: 1, responseStatus: null });
      expect(items.at(-1).error).to.match(/blocked target address (127\.0\.0\.1|::1)/);
    }
    const test = await stack.admin(org).post(`/${ids[0]}/test`).expect(200);
    expect(test.body).to.include({ delivered: false, responseStatus: null });
    expect(connections).to.equal(before);
    expect(receiver.requests).to.have.length(0);
  });

  it("never returns the secret after creation", async () => {
    const org = newId("organization");
    const created = (await stack.admin(org).post("", { url: "https://93.184.215.14/h", events: ["message.sent"] }).expect(201)).body;
    const secretPart = created.secret.slice("whsec_".length);
    const answers = [
      await stack.admin(org).get(""),
      await stack.admin(org).patch(`/${created.id}`, { events: ["message.read"] }),
      await stack.admin(org).get(`/${created.id}/deliveries`),
    ];
    for (const a of answers) expect(JSON.stringify(a.body)).to.not.include(secretPart);
    await stack.admin(org).del(`/${created.id}`).expect(204);
  });
});
