import { expect } from "chai";
import { isId, newId } from "../src";

describe("ids", () => {
  it("are prefixed and sort by creation", () => {
    const ids = Array.from({ length: 1000 }, () => newId("message"));
    expect(ids.every((id) => isId("message", id))).to.equal(true);
    expect([...ids].sort()).to.deep.equal(ids);
    expect(new Set(ids).size).to.equal(1000);
    expect(isId("contact", ids[0])).to.equal(false);
  });
});
