import { expect } from "chai";
import { signBody, signStandardWebhook, verifySignature, verifyStandardWebhook } from "../src";

// Vectors computed outside this code (openssl dgst -hmac / -macopt hexkey); the
// Standard Webhooks one is also the example of the Standard Webhooks specification.
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const BODY = '{"event":"message.sent","timestamp":"2026-01-31T12:00:00.000Z","organizationId":"org_1","data":{"id":"evt_1"}}';
const BODY_HEX = "1386f915d11dd3c759557ebad7d8fb85887597bb5391cda3712529e43f7eb117";
const SW_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SW_TS = 1614265330;
const SW_BODY = '{"test": 2432232314}';
const SW_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

describe("X-Service-Signature", () => {
  it("matches an independently computed HMAC-SHA256 (whole secret string as key)", () => {
    expect(signBody(BODY, SECRET)).to.equal(BODY_HEX);
    expect(verifySignature(BODY, BODY_HEX, SECRET)).to.equal(true);
    expect(verifySignature(Buffer.from(BODY), BODY_HEX, SECRET)).to.equal(true);
  });

  it("refuses a re-serialized body, another secret, a bad or missing header", () => {
    expect(verifySignature(JSON.stringify(JSON.parse(BODY), null, 1), BODY_HEX, SECRET)).to.equal(false);
    expect(verifySignature(BODY, BODY_HEX, SECRET + "x")).to.equal(false);
    expect(verifySignature(BODY, BODY_HEX.slice(0, 63), SECRET)).to.equal(false);
    expect(verifySignature(BODY, BODY_HEX + "00", SECRET)).to.equal(false);
    expect(verifySignature(BODY, "zz" + BODY_HEX.slice(2), SECRET)).to.equal(false);
    expect(verifySignature(BODY, undefined, SECRET)).to.equal(false);
    expect(verifySignature(BODY, [BODY_HEX], SECRET)).to.equal(false);
    expect(verifySignature(BODY, BODY_HEX, "")).to.equal(false);
  });
});

describe("Standard Webhooks form", () => {
  const headers = { "webhook-id": SW_ID, "webhook-timestamp": String(SW_TS), "webhook-signature": SW_SIG };
  const now = SW_TS * 1000;

  it("matches the specification's vector", () => {
    expect(signStandardWebhook(SW_ID, SW_TS, SW_BODY, SECRET)).to.equal(SW_SIG);
    expect(verifyStandardWebhook(SW_BODY, headers, SECRET, { now })).to.equal(true);
  });

  it("accepts one matching signature among several, and any header case", () => {
    const multi = { "Webhook-Id": SW_ID, "Webhook-Timestamp": String(SW_TS), "Webhook-Signature": `v1,AAAA ${SW_SIG} v2,zzz` };
    expect(verifyStandardWebhook(SW_BODY, multi, SECRET, { now })).to.equal(true);
  });

  it("refuses a tampered body, id or timestamp, an old timestamp, a missing header", () => {
    expect(verifyStandardWebhook(SW_BODY + " ", headers, SECRET, { now })).to.equal(false);
    expect(verifyStandardWebhook(SW_BODY, { ...headers, "webhook-id": "msg_other" }, SECRET, { now })).to.equal(false);
    expect(verifyStandardWebhook(SW_BODY, { ...headers, "webhook-timestamp": String(SW_TS + 1) }, SECRET, { now })).to.equal(false);
    expect(verifyStandardWebhook(SW_BODY, headers, SECRET, { now: now + 301_000 })).to.equal(false);
    expect(verifyStandardWebhook(SW_BODY, headers, SECRET, { now: now + 299_000 })).to.equal(true);
    expect(verifyStandardWebhook(SW_BODY, { "webhook-id": SW_ID, "webhook-timestamp": String(SW_TS) }, SECRET, { now })).to.equal(false);
    expect(verifyStandardWebhook(SW_BODY, { ...headers, "webhook-signature": "v0," + SW_SIG.slice(3) }, SECRET, { now })).to.equal(false);
    expect(verifyStandardWebhook(SW_BODY, headers, "whsec_AAAA", { now })).to.equal(false);
  });
});
