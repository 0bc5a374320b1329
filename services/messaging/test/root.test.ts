import { closeSharedHarness } from "./helpers/harness";

// Root hook: the shared harness (database, streams, simulator, service) goes away after every spec ran.
after(async function () {
  this.timeout(30_000);
  await closeSharedHarness();
});
