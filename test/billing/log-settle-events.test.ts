import pino from "pino";
import { describe, expect, it } from "vitest";
import { createSettleEventLog } from "../../src/billing/log-settle-events.ts";
import { makeUsage } from "../store/store-fixtures.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";

/** A settle event log on a real pino logger whose lines the test reads. */
function loggedEvents() {
  const lines: Record<string, unknown>[] = [];
  const { destination } = collectLogLines(lines);
  const events = createSettleEventLog({
    logger: pino({}, destination),
    journalPath: "/tmp/never-written.jsonl",
    addCharge: () => {},
  });
  return { lines, events };
}

describe("settle event log lines", () => {
  it("name the request under reqId, never requestId", async () => {
    const { lines, events } = loggedEvents();
    const usage = makeUsage({ accountId: "acct", requestId: "req_a", costNano: 1_000n });
    const failure = new Error("store down");
    events.onSettleError(failure, "req_a", { retrying: true, usage, journaled: true });
    events.onJournalError(failure, makeUsage({ accountId: "acct", requestId: "req_b", costNano: 2_500n }));
    events.onSettleError(failure, "req_c", { retrying: false, usage, journaled: false });
    events.onSettleRecovered("req_d", 3, { model: "m", chargedNano: 1_000n });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((line) => [line.reqId, line.msg])).toEqual([
      ["req_a", "settling a request failed; retrying in the background"],
      [
        "req_b",
        "could not keep a charge the store did not take in the journal: it waits in memory only (lost if the process ends before the store takes it; record it by hand from this line's usage then)",
      ],
      ["req_c", "settling a request failed; its charge was not recorded"],
      ["req_d", "settled a request after the store came back"],
    ]);
    for (const line of lines) expect(line).not.toHaveProperty("requestId");
  });

  it("give a charge the journal could not keep with everything needed to record it by hand", async () => {
    const { lines, events } = loggedEvents();
    const usage = makeUsage({ accountId: "acct", requestId: "req_j", costNano: 2_500n, promptTokens: 7 });
    events.onJournalError(new Error("ENOSPC: no space left on device"), usage);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines[0]).toMatchObject({
      level: 50,
      reqId: "req_j",
      journal: "/tmp/never-written.jsonl",
      usage: {
        id: usage.id,
        accountId: "acct",
        keyPublicId: usage.keyPublicId,
        costNano: "2500",
        promptTokens: 7,
      },
    });
  });
});
