import { expect } from "chai";
import { startSimulator, type Simulator, type WebhookStatus } from "../src";
import { APP_SECRET, expectedSignature, post, startReceiver, textBody, TOKEN, waitFor, type Receiver } from "./helpers";

const statusesOf = (receiver: Receiver): Array<WebhookStatus & { phoneNumberId: string }> =>
  receiver.received.flatMap((w) =>
    w.body.entry.flatMap((e) =>
      e.changes.flatMap((c) =>
        c.field === "messages" ? (c.value.statuses ?? []).map((s) => ({ ...s, phoneNumberId: c.value.metadata.phone_number_id })) : [],
      ),
    ),
  );

/**
 * A manual clock for the simulator: statuses fall due only when the test moves it, so which statuses share a batch
 * window (and so a POST) is decided by the test, not by how fast the machine runs the sends.
 */
const manualClock = (start = 1_800_000_000_000) => {
  let t = start;
  return { now: () => t, set: (at: number) => void (t = at), start };
};

describe("provider simulator: webhooks", () => {
  let receiver: Receiver;
  let sim: Simulator;

  before(async () => {
    receiver = await startReceiver();
    sim = await startSimulator({
      accessToken: TOKEN,
      appSecret: APP_SECRET,
      webhookUrl: receiver.url,
      statusDelaysMs: { sent: 20, delivered: 60, read: 100 },
      templateAccountId: "waba_test",
    });
  });
  after(async () => {
    await sim.close();
    await receiver.close();
  });
  beforeEach(() => {
    sim.reset();
    receiver.received.length = 0;
    receiver.nextStatuses = [];
  });

  const send = async (to: string, callbackData: string, phoneNumberId = "pn_1") => {
    const { status, json } = await post(`${sim.url}/${phoneNumberId}/messages`, textBody(to, callbackData));
    expect(status).to.equal(200);
    return (json as { messages: Array<{ id: string }> }).messages[0].id;
  };

  /** A simulator on a manual clock (delays sent 20, delivered 60, read 100 ms; windows of 20 ms). */
  const withClock = async (fn: (clocked: Simulator, clock: ReturnType<typeof manualClock>) => Promise<void>) => {
    const clock = manualClock();
    const clocked = await startSimulator({
      accessToken: TOKEN,
      appSecret: APP_SECRET,
      webhookUrl: receiver.url,
      statusDelaysMs: { sent: 20, delivered: 60, read: 100 },
      templateAccountId: "waba_test",
      now: clock.now,
    });
    try {
      await fn(clocked, clock);
    } finally {
      await clocked.close();
    }
  };
  const sendTo = async (target: Simulator, to: string, callbackData: string, phoneNumberId = "pn_1") => {
    const { status, json } = await post(`${target.url}/${phoneNumberId}/messages`, textBody(to, callbackData));
    expect(status).to.equal(200);
    return (json as { messages: Array<{ id: string }> }).messages[0].id;
  };

  describe("status callbacks", () => {
    it("posts sent, delivered, read in order, signed, with the callback data echoed", () =>
      withClock(async (clocked, clock) => {
      const wamid = await sendTo(clocked, "+15550001111", "msg_1");
      // Each status falls due in its own window when the clock reaches it: one POST each, in order.
      for (const [n, at] of [[1, 20], [2, 60], [3, 100]]) {
        clock.set(clock.start + at);
        await waitFor(() => receiver.received.length >= n);
      }
      await clocked.idle();

      const statuses = statusesOf(receiver);
      expect(statuses.map((s) => s.status)).to.deep.equal(["sent", "delivered", "read"]);
      for (const s of statuses) {
        expect(s.id).to.equal(wamid);
        expect(s.recipient_id).to.equal("15550001111");
        expect(s.biz_opaque_callback_data).to.equal("msg_1");
        expect(s.timestamp).to.match(/^\d{10}$/);
        expect(s.phoneNumberId).to.equal("pn_1");
      }
      for (const w of receiver.received) {
        expect(w.signature).to.equal(expectedSignature(w.raw));
        expect(w.body.object).to.equal("whatsapp_business_account");
        expect(w.body.entry[0].id).to.equal("waba_test");
        expect(w.body.entry[0].changes[0].field).to.equal("messages");
      }
      // Each status is its own webhook here: the delays put them in different windows.
      expect(receiver.received).to.have.length(3);
      expect(statuses.map((s) => s.timestamp)).to.deep.equal([20, 60, 100].map((d) => String(Math.floor((clock.start + d) / 1000))));
      expect(receiver.received[0].body).to.deep.equal({
        object: "whatsapp_business_account",
        entry: [
          {
            id: "waba_test",
            changes: [{ field: "messages", value: { metadata: { phone_number_id: "pn_1" }, statuses: [statuses[0]].map(({ phoneNumberId: _, ...s }) => s) } }],
          },
        ],
      });
    }));

    it("ends a failing number's message in failed with error 131026", async () => {
      sim.failNumber("+15550002222");
      const wamid = await send("15550002222", "msg_f");
      await waitFor(() => statusesOf(receiver).length >= 2);
      await sim.idle(); // nothing left scheduled: no read may follow
      const statuses = statusesOf(receiver);
      expect(statuses.map((s) => s.status)).to.deep.equal(["sent", "failed"]);
      expect(statuses[1]).to.include({ id: wamid, recipient_id: "15550002222", biz_opaque_callback_data: "msg_f" });
      expect(statuses[1].errors).to.deep.equal([{ code: 131026, title: "Message undeliverable" }]);
    });

    it("failing numbers can be set over HTTP", async () => {
      expect((await post(`${sim.url}/_sim/fail-numbers`, { numbers: ["15550003333"] }, null)).status).to.equal(200);
      await send("15550003333", "msg_g");
      await waitFor(() => statusesOf(receiver).some((s) => s.status === "failed"));
    });

    it("batches statuses due in the same window into one POST, one entry per phone number id", () =>
      withClock(async (clocked, clock) => {
        // 60 sends at one instant of the simulator's clock: their statuses fall due in three windows.
        const ids = await Promise.all(
          Array.from({ length: 60 }, (_, i) => sendTo(clocked, `1555000${String(i).padStart(4, "0")}`, `msg_${i}`, i % 2 === 0 ? "pn_a" : "pn_b")),
        );
        expect(receiver.received).to.have.length(0);
        // Each window, once due, goes out as ONE POST holding all of its 60 statuses, one entry per phone number id.
        for (const [n, at, status] of [[1, 20, "sent"], [2, 60, "delivered"], [3, 100, "read"]] as const) {
          clock.set(clock.start + at);
          await waitFor(() => receiver.received.length >= n);
          expect(receiver.received, `POSTs once the ${status} window is due`).to.have.length(n);
          const w = receiver.received[n - 1];
          const entries = w.body.entry.map((e) => (e.changes[0].field === "messages" ? e.changes[0].value : undefined));
          expect(entries.map((v) => v?.metadata.phone_number_id).sort()).to.deep.equal(["pn_a", "pn_b"]);
          for (const v of entries) expect(v?.statuses?.map((s) => s.status)).to.deep.equal(Array(30).fill(status));
        }
        await clocked.idle();
        expect(receiver.received).to.have.length(3);
        const statuses = statusesOf(receiver);
        expect(statuses).to.have.length(180);
        for (const id of ids) {
          expect(statuses.filter((s) => s.id === id).map((s) => s.status)).to.deep.equal(["sent", "delivered", "read"]);
        }
        for (const w of receiver.received) expect(w.signature).to.equal(expectedSignature(w.raw));

        // Windows due by the same tick go out together: 10 more sends, the clock jumps past all their statuses.
        receiver.received.length = 0;
        const base = clock.now();
        await Promise.all(Array.from({ length: 10 }, (_, i) => sendTo(clocked, `1555100${String(i).padStart(4, "0")}`, `msg_j${i}`, "pn_a")));
        clock.set(base + 100);
        await waitFor(() => statusesOf(receiver).length >= 30);
        await clocked.idle();
        expect(receiver.received).to.have.length(1);
      }));

    it("retries a callback the gateway did not accept", async () => {
      receiver.nextStatuses = [503, 502];
      await send("15550004444", "msg_r");
      await waitFor(() => statusesOf(receiver).length >= 3);
      expect(statusesOf(receiver).map((s) => s.status)).to.deep.equal(["sent", "delivered", "read"]);
    });

    it("posts nothing when autoStatuses is off", async () => {
      const quiet = await startSimulator({ accessToken: TOKEN, webhookUrl: receiver.url, autoStatuses: false, statusDelaysMs: { sent: 1, delivered: 2, read: 3 } });
      try {
        expect((await post(`${quiet.url}/pn/messages`, textBody("15550001111"))).status).to.equal(200);
        await quiet.idle(); // nothing scheduled at all
        expect(quiet.requests[0].providerMessageId).to.match(/^wamid\./);
        expect(receiver.received).to.have.length(0);
      } finally {
        await quiet.close();
      }
    });
  });

  describe("injection", () => {
    it("injects a signed inbound text message", async () => {
      const id = await sim.injectInbound({ phoneNumberId: "pn_1", from: "+15550001111", text: "STOP", name: "Ana", timestamp: 1700000000 });
      expect(id).to.match(/^wamid\./);
      expect(receiver.received).to.have.length(1);
      const w = receiver.received[0];
      expect(w.signature).to.equal(expectedSignature(w.raw));
      expect(w.body).to.deep.equal({
        object: "whatsapp_business_account",
        entry: [
          {
            id: "waba_test",
            changes: [
              {
                field: "messages",
                value: {
                  metadata: { phone_number_id: "pn_1" },
                  contacts: [{ profile: { name: "Ana" }, wa_id: "15550001111" }],
                  messages: [{ from: "15550001111", id, timestamp: "1700000000", type: "text", text: { body: "STOP" } }],
                },
              },
            ],
          },
        ],
      });
    });

    it("injects a button reply with a given id, also over HTTP", async () => {
      const { status, json } = await post(
        `${sim.url}/_sim/inbound`,
        { phoneNumberId: "pn_2", from: "15550001111", button: { text: "Yes", payload: "YES_1" }, id: "wamid.BTN" },
        null,
      );
      expect(status).to.equal(200);
      expect(json).to.deep.equal({ id: "wamid.BTN" });
      const change = receiver.received[0].body.entry[0].changes[0];
      expect(change.field).to.equal("messages");
      if (change.field !== "messages") return;
      expect(change.value.messages?.[0]).to.include({ from: "15550001111", id: "wamid.BTN", type: "button" });
      expect(change.value.messages?.[0]).to.have.property("button").that.deep.equal({ text: "Yes", payload: "YES_1" });
      expect(change.value.messages?.[0].timestamp).to.match(/^\d{10}$/);
    });

    it("injects a status", async () => {
      await sim.injectStatus({ phoneNumberId: "pn_1", providerMessageId: "wamid.X", status: "delivered", recipientId: "+15550001111", callbackData: "msg_7", timestamp: "1700000001" });
      expect(statusesOf(receiver)).to.deep.equal([
        { id: "wamid.X", status: "delivered", timestamp: "1700000001", recipient_id: "15550001111", biz_opaque_callback_data: "msg_7", phoneNumberId: "pn_1" },
      ]);
      expect(receiver.received[0].signature).to.equal(expectedSignature(receiver.received[0].raw));
    });

    it("injects a template status update, also over HTTP", async () => {
      await sim.injectTemplateStatus({ providerTemplateId: "123456", name: "promo", language: "en_US", event: "REJECTED", reason: "INVALID_FORMAT" });
      expect(receiver.received[0].body).to.deep.equal({
        object: "whatsapp_business_account",
        entry: [
          {
            id: "waba_test",
            changes: [
              {
                field: "message_template_status_update",
                value: { event: "REJECTED", message_template_id: 123456, message_template_name: "promo", message_template_language: "en_US", reason: "INVALID_FORMAT" },
              },
            ],
          },
        ],
      });
      const { status } = await post(
        `${sim.url}/_sim/template-status`,
        { templateAccountId: "waba_other", providerTemplateId: 42, name: "promo", language: "en_US", event: "APPROVED" },
        null,
      );
      expect(status).to.equal(200);
      expect(receiver.received[1].body.entry[0].id).to.equal("waba_other");
      expect(receiver.received[1].signature).to.equal(expectedSignature(receiver.received[1].raw));
    });

    it("postRaw sends any body with a wrong or missing signature and returns the status", async () => {
      receiver.nextStatuses = [401];
      expect(await sim.postRaw({ object: "whatsapp_business_account", entry: [] }, { signature: "sha256=00" })).to.equal(401);
      expect(await sim.postRaw({ object: "whatsapp_business_account", entry: [] })).to.equal(200);
      expect(receiver.received[0].signature).to.equal(expectedSignature(receiver.received[0].raw));
      expect(await sim.postRaw({ hello: 1 }, { signature: null })).to.equal(200);
      expect(receiver.received[1].signature).to.equal(undefined);
      const { json } = await post(`${sim.url}/_sim/raw`, { body: { a: 1 }, signature: "sha256=bad" }, null);
      expect(json).to.deep.equal({ status: 200 });
      expect(receiver.received[2].signature).to.equal("sha256=bad");
    });
  });
});
