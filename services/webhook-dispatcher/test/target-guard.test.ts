import { expect } from "chai";
import { blockedAddressReason, checkUrlShape } from "../src/use-cases/target-guard";
import { SummarizedEventData } from "@platform/contracts";
import { serializeEvent, summarize, MAX_PAYLOAD_BYTES } from "../src/use-cases/payload";
import { truncateChars } from "../src/use-cases/http-sender";

describe("target guard (unit)", () => {
  it("classifies addresses", () => {
    for (const ip of ["127.0.0.1", "127.8.9.1", "10.1.2.3", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.1.1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "[::1]", "fe80::1%eth0"]) {
      expect(blockedAddressReason(ip), ip).to.be.a("string");
    }
    for (const ip of ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(blockedAddressReason(ip), ip).to.equal(null);
    }
    expect(blockedAddressReason("169.254.169.254")).to.equal("cloud metadata address");
  });

  it("requires https unless private targets are allowed", () => {
    expect(checkUrlShape("http://example.com", false).ok).to.equal(false);
    expect(checkUrlShape("https://example.com", false).ok).to.equal(true);
    expect(checkUrlShape("http://127.0.0.1:3000/x", true).ok).to.equal(true);
    expect(checkUrlShape("ftp://example.com", true).ok).to.equal(false);
    expect(checkUrlShape("https://LOCALHOST./x", false).ok).to.equal(false);
  });
});

describe("payload (unit)", () => {
  it("summarizes over 256 KB without cutting JSON, keeping every small field and naming the ones left out", () => {
    const data = {
      id: "evt_1", messageId: "msg_1", contactId: null, phone: "+15550001111", type: "text", receivedAt: "2026-11-27T10:00:00.000Z",
      media: { id: "m1", mimeType: "image/png" }, text: "x".repeat(MAX_PAYLOAD_BYTES),
    };
    const body = serializeEvent({ event: "message.received", timestamp: "t", organizationId: "org_1", data });
    expect(JSON.parse(body)).to.deep.equal({
      event: "message.received", timestamp: "t", organizationId: "org_1",
      data: { id: "evt_1", messageId: "msg_1", contactId: null, phone: "+15550001111", type: "text", receivedAt: "2026-11-27T10:00:00.000Z",
        media: { id: "m1", mimeType: "image/png" }, summarized: true, omitted: ["text"] },
    });
    expect(SummarizedEventData.safeParse(JSON.parse(body).data).success).to.equal(true);
    expect(summarize({ id: "e", nested: { blob: "b".repeat(2_000) }, n: 3 } as never)).to.deep.equal({ id: "e", n: 3, summarized: true, omitted: ["nested"] });
    // Exactly at the limit stays whole.
    const base = serializeEvent({ event: "message.sent", timestamp: "t", organizationId: "o", data: { id: "e", pad: "" } });
    const pad = "p".repeat(MAX_PAYLOAD_BYTES - Buffer.byteLength(base));
    const exact = serializeEvent({ event: "message.sent", timestamp: "t", organizationId: "o", data: { id: "e", pad } });
    expect(Buffer.byteLength(exact)).to.equal(MAX_PAYLOAD_BYTES);
    expect(JSON.parse(exact).data.pad).to.equal(pad);
  });

  it("cuts response bodies by characters, never inside a surrogate pair", () => {
    expect(truncateChars("a".repeat(2000), 1024)).to.have.length(1024);
    expect(Array.from(truncateChars("😀".repeat(2000), 1024))).to.have.length(1024);
    expect(truncateChars("short", 1024)).to.equal("short");
  });
});
