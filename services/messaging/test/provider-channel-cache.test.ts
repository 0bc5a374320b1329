import { expect } from "chai";
import type { Queryable } from "../src/db/repositories/queryable";
import { SendLookups } from "../src/use-cases/send-lookups";

/**
 * Provider batches name their channel by the provider's phone number id; the
 * channel is read once and kept (one query per provider batch before). The
 * mapping never changes (the id is set at creation only), and a channel change
 * drops it all the same, as for sends.
 */
describe("unit: channels of provider batches kept in memory", () => {
  const channel = (id: string, org: string) => ({ id, organization_id: org, provider_phone_number_id: `pn-${id}` });
  function fakeDb(rows: Map<string, ReturnType<typeof channel>>) {
    let queries = 0;
    let hold: Promise<void> | undefined;
    const db = {
      async query(_sql: string, params: unknown[]) {
        queries++;
        if (hold) await hold;
        const row = [...rows.values()].find((r) => r.provider_phone_number_id === params[0]);
        return row ? [row] : [];
      },
    } as unknown as Queryable;
    return { db, queries: () => queries, holdNext: (p: Promise<void>) => (hold = p), release: () => (hold = undefined) };
  }

  it("reads a channel once for many batches, not an unknown number, and again after its organization's channels changed", async () => {
    const rows = new Map([["ch1", channel("ch1", "org1")]]);
    const f = fakeDb(rows);
    const lookups = new SendLookups(f.db, 60_000);
    for (let k = 0; k < 5; k++) expect((await lookups.forProviderNumber("pn-ch1"))?.id).to.equal("ch1");
    expect(f.queries()).to.equal(1);

    expect(await lookups.forProviderNumber("pn-ch2")).to.equal(undefined);
    rows.set("ch2", channel("ch2", "org1"));
    expect((await lookups.forProviderNumber("pn-ch2"))?.id).to.equal("ch2");
    expect(f.queries()).to.equal(3);

    lookups.forgetOrganization("org2");
    await lookups.forProviderNumber("pn-ch1");
    expect(f.queries()).to.equal(3);
    lookups.forgetOrganization("org1");
    await lookups.forProviderNumber("pn-ch1");
    expect(f.queries()).to.equal(4);
  });

  it("does not keep a read that an eviction overtook", async () => {
    const f = fakeDb(new Map([["ch1", channel("ch1", "org1")]]));
    const lookups = new SendLookups(f.db, 60_000);
    let release!: () => void;
    f.holdNext(new Promise<void>((r) => (release = r)));
    const inFlight = lookups.forProviderNumber("pn-ch1");
    lookups.forgetOrganization("org1");
    f.release();
    release();
    expect((await inFlight)?.id).to.equal("ch1");
    await lookups.forProviderNumber("pn-ch1");
    expect(f.queries()).to.equal(2);
  });
});
