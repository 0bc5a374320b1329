import { expect } from "chai";
import { createDataSource, type DataSource } from "@platform/db";
import { hashApiKey } from "../src/auth/api-keys";
import { AuthCache } from "../src/auth/key-cache";
import { definitionEntities, definitionMigrations, SCHEMA } from "../src/db/definition";
import { ApiKeys } from "../src/use-cases/api-keys";
import { Organizations } from "../src/use-cases/organizations";
import { GatewayHarness, holdingProxy, type HoldingProxy } from "./harness";

describe("gateway: API-key cache and revocation", () => {
  const h = new GatewayHarness();
  let proxy: HoldingProxy;
  let slowDb: DataSource;

  before(async () => {
    await h.start();
    proxy = await holdingProxy(h.env.databaseUrl);
    // One connection: the cache's next query waits for the held one, as a busy pool would make it.
    slowDb = createDataSource({ url: proxy.urlFor(h.env.databaseUrl), schema: SCHEMA, entities: definitionEntities, migrations: definitionMigrations, poolSize: 1 });
    await slowDb.initialize();
  });
  after(async () => {
    proxy.release();
    await slowDb.destroy();
    await proxy.close();
    await h.stop();
  });

  it("does not keep a key that a lookup read just before its revocation committed", async () => {
    const { id, key, keyId } = await h.organization();
    const hash = hashApiKey(key);
    const cache = new AuthCache(slowDb, { perSecond: 50, burst: 100 }, h.log);
    const apiKeys = new ApiKeys(h.db, h.replicas[0].bus, cache, h.env.internalToken);
    await slowDb.query("SELECT 1"); // the pool's connection is open: only the lookup's own reply is held below

    proxy.hold();
    const inFlight = cache.principal(hash);
    await proxy.heldReply(); // Postgres has read the key's row, still valid; the cache has not seen it yet
    await apiKeys.revoke(id, keyId); // commits, then evicts this cache
    const afterRevocation = cache.principal(hash); // must not join the load that started before the eviction
    proxy.release();

    // The lookup that began before the revocation answers its own request only …
    expect(await inFlight).to.deep.equal({ keyId, organizationId: id });
    // … every lookup after it refuses the key, rather than for the cache's 30 s TTL.
    expect(await afterRevocation).to.equal(null);
    expect(await cache.principal(hash)).to.equal(null);
  });

  it("does not keep an organization's plan read just before its change", async () => {
    const { id } = await h.organization({ plan: "growth" });
    const cache = new AuthCache(slowDb, { perSecond: 50, burst: 100 }, h.log);
    await slowDb.query("SELECT 1");

    proxy.hold();
    const inFlight = cache.organization(id);
    await proxy.heldReply();
    await h.db.query(`UPDATE gateway.organizations SET plan = 'inactive' WHERE id = $1`, [id]);
    cache.evictOrganization(id); // what the organization-changed broadcast does on every replica
    proxy.release();

    expect((await inFlight)?.plan).to.equal("growth");
    expect((await cache.organization(id))?.plan).to.equal("inactive");
  });

  it("a plan change is in force in the replica that answered it before its answer leaves, not only after the broadcast", async () => {
    const { id } = await h.organization({ plan: "growth" });
    const cache = new AuthCache(h.db, { perSecond: 50, burst: 100 }, h.log);
    const organizations = new Organizations(h.db, h.replicas[0].bus, { perSecond: 50, burst: 100 }, cache);
    expect((await cache.organization(id))?.plan).to.equal("growth"); // cached, for the TTL
    await organizations.update(id, { plan: "inactive" });
    // No turn of the event loop in between: the broadcast cannot have come back yet; the answer must not wait for it.
    expect((await cache.organization(id))?.plan).to.equal("inactive");
  });
});
