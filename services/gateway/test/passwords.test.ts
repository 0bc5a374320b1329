import { expect } from "chai";
import { DEFAULT_SCRYPT_COST, hashPassword, verifyPassword } from "../src/auth/passwords";

describe("console passwords (scrypt)", () => {
  it("hashes at OWASP's N=2^15, r=8, p=3 by default with a random salt, and verifies", async () => {
    expect(DEFAULT_SCRYPT_COST).to.equal(15);
    const a = await hashPassword("correct horse battery staple");
    const b = await hashPassword("correct horse battery staple");
    expect(a).to.match(/^scrypt\$32768\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(a).to.not.equal(b);
    expect(await verifyPassword("correct horse battery staple", a)).to.equal(true);
    expect(await verifyPassword("correct horse battery stapl", a)).to.equal(false);
  });

  it("verifies with the parameters stored in the hash, so the cost can change later", async () => {
    const cheap = await hashPassword("correct horse battery staple", 12);
    expect(cheap.startsWith("scrypt$4096$8$1$")).to.equal(true);
    expect(await verifyPassword("correct horse battery staple", cheap)).to.equal(true);
  });

  it("refuses malformed or oversized stored parameters without running them", async () => {
    const good = await hashPassword("pw-pw-pw-pw-pw", 12);
    const parts = good.split("$");
    for (const bad of ["", "bcrypt$x", [parts[0], 2 ** 30, 8, 1, parts[4], parts[5]].join("$"), [parts[0], 4096, 8, 1000, parts[4], parts[5]].join("$")]) {
      expect(await verifyPassword("pw-pw-pw-pw-pw", bad), bad).to.equal(false);
    }
  });

  it("treats canonically equal Unicode passwords as one (NFC)", async () => {
    const h = await hashPassword("caf\u00e9-password-1", 12);
    expect(await verifyPassword("cafe\u0301-password-1", h)).to.equal(true);
  });
});
