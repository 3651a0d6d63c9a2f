/**
 * The lines about charges the store did not take at once name their request under `reqId`, as
 * every request's own lines do (pino's request logger): they put it under `requestId`, so a
 * search for a request's lines by `reqId` missed its charge's fate.
 */
import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createSettleEventLog } from "../../src/billing/log-settle-events.ts";
import { makeUsage } from "../store/store-fixtures.ts";

/** A settle event log on a real pino logger whose lines the test reads. */
function loggedEvents() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line !== "") lines.push(JSON.parse(line));
      done();
    },
  });
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
    events.onJournalError(failure, "req_b");
    events.onSettleError(failure, "req_c", { retrying: false, usage, journaled: false });
    events.onSettleRecovered("req_d", 3, { model: "m", chargedNano: 1_000n });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((line) => [line.reqId, line.msg])).toEqual([
      ["req_a", "settling a request failed; retrying in the background"],
      ["req_b", "could not keep a charge the store did not take in the journal: it waits in memory only"],
      ["req_c", "settling a request failed; its charge was not recorded"],
      ["req_d", "settled a request after the store came back"],
    ]);
    for (const line of lines) expect(line).not.toHaveProperty("requestId");
  });
});
