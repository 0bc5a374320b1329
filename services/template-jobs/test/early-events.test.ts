import { expect } from "chai";
import { BatchesInFlight, RecentSet, type TemplateJobsContext } from "../src/context";
import { finalizeSend } from "../src/use-cases/finalize-send";

/** A context whose database records every use (a statement means the event took the slow path). */
function contextWithoutDatabase() {
  const statements: string[] = [];
  const db = {
    query: async (sql: string) => {
      statements.push(sql);
      return [];
    },
    transaction: async () => {
      statements.push("transaction");
      return "unknown";
    },
  };
  const ctx = {
    db,
    env: { SEND_BATCH_TIMEOUT_MS: 60_000 },
    finalMessages: new RecentSet(),
    waitingMessages: new RecentSet(),
    batches: new BatchesInFlight(),
    runs: new BatchesInFlight(),
  } as unknown as TemplateJobsContext;
  return { ctx, statements };
}

const sentEvent = (messageId: string) =>
  ({ id: `evt_${messageId}`, event: "message.sent", data: { templateJobId: "job_1", messageId } }) as unknown as Parameters<typeof finalizeSend>[1];

describe("unit: a template send's event that arrives before its batch's answer", () => {
  it("waits for the batch to be recorded here and then needs no statement, instead of a redelivery", async () => {
    const { ctx, statements } = contextWithoutDatabase();
    ctx.batches.begin("job_1");
    ctx.batches.begin("job_1");
    let done = false;
    const handled = finalizeSend(ctx, sentEvent("msg_a")).then(() => (done = true));
    // Another batch of the job is recorded first: the event looks again and keeps waiting.
    ctx.finalMessages.add("msg_other");
    ctx.batches.end("job_1");
    await new Promise((r) => setImmediate(r));
    expect(done).to.equal(false);
    // Its own batch is recorded: `msg_a` sent.
    ctx.finalMessages.add("msg_a");
    ctx.batches.end("job_1");
    await handled;
    expect(done).to.equal(true);
    expect(statements).to.deep.equal([]);
  });

  it("takes the database path when its batch recorded it `waiting` (messaging retries it)", async () => {
    const { ctx, statements } = contextWithoutDatabase();
    ctx.batches.begin("job_1");
    ctx.batches.begin("job_1");
    const handled = finalizeSend(ctx, sentEvent("msg_w"));
    ctx.waitingMessages.add("msg_w");
    ctx.batches.end("job_1");
    await handled.catch(() => undefined);
    expect(statements.length).to.be.greaterThan(0);
    expect(statements[0]).to.match(/SELECT state FROM .*job_recipients/);
  });

  it("takes the database path at once when no batch of the job is in flight in this process", async () => {
    const { ctx, statements } = contextWithoutDatabase();
    await finalizeSend(ctx, sentEvent("msg_b")).catch(() => undefined);
    expect(statements[0]).to.match(/SELECT state FROM .*job_recipients/);
  });
});
