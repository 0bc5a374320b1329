import { closeSharedHarness } from "./helpers/harness";

// Root hook: the shared harness (databases, streams, simulator, services) goes away after every spec ran.
after(async function () {
  this.timeout(60_000);
  await closeSharedHarness();
});
