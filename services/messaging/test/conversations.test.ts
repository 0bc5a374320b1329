import { expect } from "chai";
import { eventually } from "@platform/testing";
import { api, createChannel, eventsOf, newOrg, receiveInbound, sharedHarness, startHarness, uniquePhone, type Harness } from "./helpers/harness";

describe("GET /api/v1/conversations", () => {
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await sharedHarness();
  });

  it("pages in creation order with an opaque cursor; nextCursor absent at the end; tenant-scoped", async () => {
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phones = [uniquePhone(), uniquePhone(), uniquePhone(), uniquePhone(), uniquePhone()];
    for (const p of phones) await receiveInbound(h, channel, p);
    // Another organization's conversation never shows up.
    const other = newOrg();
    await receiveInbound(h, await createChannel(h, other), uniquePhone());

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await api(h, org).get(`/api/v1/conversations?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status).to.equal(200);
      expect(res.body.items.length).to.be.at.most(2);
      for (const c of res.body.items) {
        expect(c).to.have.keys(["id", "contactId", "messagingChannelId", "phone", "status", "openedAt", "closedAt", "lastMessageAt", "createdAt", "updatedAt"]);
        seen.push(c.phone);
      }
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).to.equal(3);
    expect(seen).to.deep.equal(phones);
    // A cursor is the organization's that listed it: replayed on another organization's list, it is not one of ours.
    const first = await api(h, org).get("/api/v1/conversations?limit=2");
    const foreign = await api(h, other).get(`/api/v1/conversations?cursor=${encodeURIComponent(first.body.nextCursor)}`);
    expect([foreign.status, foreign.body.error?.code]).to.deep.equal([400, "INVALID_CURSOR"]);

    const all = await api(h, org).get("/api/v1/conversations");
    expect(all.body.items).to.have.length(5);
    expect(all.body).to.not.have.property("nextCursor");
  });

  it("400 INVALID_CURSOR for a forged cursor and VALIDATION_ERROR for a bad limit", async () => {
    const org = newOrg();
    const forged = await api(h, org).get("/api/v1/conversations?cursor=eyJrIjoiY29udmVyc2F0aW9ucyJ9.abc");
    expect(forged.status).to.equal(400);
    expect(forged.body.error.code).to.equal("INVALID_CURSOR");
    for (const q of ["limit=0", "limit=101", "limit=abc", "limit=1e2", "limit=0x10", "limit=1.0", "limit=1&limit=2"]) {
      const res = await api(h, org).get(`/api/v1/conversations?${q}`);
      expect(res.status, q).to.equal(400);
      expect(res.body.error.code).to.equal("VALIDATION_ERROR");
      expect(res.body.error.details[0].path).to.equal("query.limit");
    }
  });
});

describe("idle conversations", () => {
  // Own database and streams: a short idle timeout must not close the shared harness' conversations.
  let h: Harness;
  before(async function () {
    this.timeout(60_000);
    h = await startHarness("msgidle", { CONVERSATION_IDLE_TIMEOUT_MS: "1500" });
  });
  after(async function () {
    this.timeout(30_000);
    await h.close();
  });

  it("closes a conversation after CONVERSATION_IDLE_TIMEOUT_MS without messages, emits conversation.closed once, and a new message opens a new one", async function () {
    this.timeout(20_000);
    const org = newOrg();
    const channel = await createChannel(h, org);
    const phone = uniquePhone();
    await receiveInbound(h, channel, phone);
    const first = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "keep it open" });
    expect(first.status).to.equal(200);
    const closed = await eventually(() => eventsOf(h, "conversation.closed", (d) => d.conversationId === first.body.conversationId)[0], 8_000);
    expect(closed.data).to.include({ contactId: first.body.contactId, messagingChannelId: channel.id, phone });
    const list = await api(h, org).get("/api/v1/conversations");
    expect(list.body.items[0]).to.include({ id: first.body.conversationId, status: "closed" });
    expect(list.body.items[0].closedAt).to.be.a("string");

    const second = await api(h, org).post("/api/v1/messages").send({ to: phone, text: "new conversation" });
    expect(second.status).to.equal(200);
    expect(second.body.conversationId).to.not.equal(first.body.conversationId);
    await eventually(() => eventsOf(h, "conversation.opened", (d) => d.conversationId === second.body.conversationId).length === 1);
    expect(eventsOf(h, "conversation.closed", (d) => d.conversationId === first.body.conversationId)).to.have.length(1);
  });
});
