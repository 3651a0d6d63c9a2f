/**
 * Regression: once a shutdown began, every charge went to the journal before the store was asked
 * to settle it. A non-streamed answer is sent only after its settle charged it, so a SIGKILL
 * while its charge was being recorded had the next start record, from the journal, a charge for
 * an answer never sent. Now only streamed charges (the client has the answer) are journaled up
 * front; a whole answer's charge goes there only when its settle attempt is given up on, just
 * before its answer goes out, as after any failed settle.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ChargeJournal } from "../../src/billing/charge-journal.ts";
import { BillingAdmission } from "../../src/billing/reserve-and-settle.ts";
import type { AdmissionTicket } from "../../src/chat/chat-admission.ts";
import type { RequestKey } from "../../src/chat/request-key.ts";
import { KeyLimits } from "../../src/limits/key-limits.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeAccount } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { until } from "../support/until.ts";
import { pricedModel as model } from "./priced-model.ts";

const directory = makeTemporaryDirectory();

/** The drain's time limit on a settle attempt, short for the test. */
const LIMIT_MS = 300;

describe("a shutdown's journal and the charges of whole answers", () => {
  let store: Store;
  let journalPath: string;
  /** Settles held as the store hangs: each goes through when the test lets it. */
  let held: (() => void)[];
  let hanging: boolean;

  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory), { owner: true });
    journalPath = join(directory, `journal-${Math.random().toString(36).slice(2)}.jsonl`);
    held = [];
    hanging = true;
  });
  afterEach(async () => {
    hanging = false;
    for (const resume of held.splice(0)) resume();
    await store.close();
  });

  /** An admission over the store, which hangs while `hanging`, with a journal at `path`. */
  async function setUp(path: string) {
    const account = makeAccount({ name: "drain", balanceNano: 1_000_000n });
    await store.insertAccount(account);
    const hangingStore: Store = {
      ...store,
      settle: async (usage) => {
        if (hanging) await new Promise<void>((resume) => held.push(resume));
        return store.settle(usage);
      },
    };
    const failed: { requestId: string; retrying: boolean; journaled: boolean }[] = [];
    const admission = new BillingAdmission({
      store: hangingStore,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      journal: new ChargeJournal(path),
      onJournalError: () => {},
      onSettleError: (_error, requestId, { retrying, journaled }) =>
        void failed.push({ requestId, retrying, journaled }),
      drainSettleTimeoutMs: LIMIT_MS,
    });
    const key: RequestKey = {
      publicId: "keydrain0001",
      accountId: account.id,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
    };
    const admit = (requestId: string, streamed: boolean) =>
      admission.admit({
        requestId,
        key,
        model,
        user: undefined,
        setHeader: () => {},
        annotate: () => {},
        promptTokens: 10,
        maxCompletionTokens: 20,
        streamed,
      });
    /** Settles a whole answer of 10 + 5 tokens (15,000 nano-units); `done()` once it returned. */
    const settle = (ticket: AdmissionTicket) => {
      let returned = false;
      const settled = ticket
        .settle({
          usage: { promptTokens: 10, completionTokens: 5 },
          finishReason: "stop",
          errorCode: undefined,
          timings: { firstPartMs: 1, totalMs: 2 },
        })
        .then(() => {
          returned = true;
        });
      return { settled, done: () => returned };
    };
    return { account, admission, admit, settle, failed };
  }

  const owedRequests = () =>
    new ChargeJournal(journalPath)
      .readOwed()
      .map((usage) => usage.requestId)
      .sort();

  it("journals up front only streamed charges; a whole answer's when its attempt is given up on, before it goes out; a late commit charges once", async () => {
    const { account, admission, admit, settle, failed } = await setUp(journalPath);
    const plainBefore = await admit("plain-before", false);
    const plainDuring = await admit("plain-during", false);
    const streamDuring = await admit("stream-during", true);

    // One whole answer's settle is under way as the shutdown begins; then two more answers end.
    const first = settle(plainBefore);
    await until(() => held.length === 1);
    admission.beginClosing();
    const second = settle(plainDuring);
    const third = settle(streamDuring);
    await until(() => held.length === 3);

    // A SIGKILL now: the next start records the stream's charge (its client has the answer),
    // and neither whole answer's, which were never sent.
    expect(owedRequests()).toEqual(["stream-during"]);
    await sleep(LIMIT_MS / 3);
    expect(owedRequests()).toEqual(["stream-during"]);
    expect([first.done(), second.done(), third.done()]).toEqual([false, false, false]);

    // The store still hangs when the time is up: each whole answer's charge is kept in the
    // journal just before its settle returns (its answer then goes out), as after a failed settle.
    await Promise.all([first.settled, second.settled, third.settled]);
    expect(owedRequests()).toEqual(["plain-before", "plain-during", "stream-during"]);

    // The held settles commit late: each charge leaves the journal, and is charged once.
    hanging = false;
    for (const resume of held.splice(0)) resume();
    await until(() => !existsSync(journalPath));
    await admission.close();
    // Each was retried in the background, kept in the journal meanwhile; none was given up.
    expect(failed.every((each) => each.retrying && each.journaled)).toBe(true);
    const rows = await store.listUsage();
    expect(rows.map((row) => [row.requestId, row.costNano]).sort()).toEqual([
      ["plain-before", 15_000n],
      ["plain-during", 15_000n],
      ["stream-during", 15_000n],
    ]);
    expect(await store.getAccountMoney(account.id)).toMatchObject({
      balanceNano: 1_000_000n - 45_000n,
      reservedNano: 0n,
    });
  });

  it("waits for the store for a whole answer's charge the journal cannot take, instead of giving it up", async () => {
    // A journal in a folder that does not exist: no charge can be written there.
    const { admission, admit, settle } = await setUp(join(directory, "missing", "journal.jsonl"));
    const plain = await admit("plain-unjournaled", false);
    admission.beginClosing();
    const attempt = settle(plain);
    await until(() => held.length === 1);
    await sleep(LIMIT_MS * 2);
    // Given up on, the charge would live in memory only: the answer waits for the store.
    expect(attempt.done()).toBe(false);
    hanging = false;
    for (const resume of held.splice(0)) resume();
    await attempt.settled;
    await admission.close();
    expect((await store.listUsage()).map((row) => [row.requestId, row.costNano])).toEqual([
      ["plain-unjournaled", 15_000n],
    ]);
  });
});
