import { describe, expect, it } from "vitest";
import { ACCOUNT_IDS_PER_QUERY } from "../../src/store/kysely-store.ts";
import { openStore } from "../../src/store/open-store.ts";
import { makeAccount } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/**
 * Counts the event loop's turns (a `setImmediate` that schedules itself again) until `stop`:
 * each one is a turn in which other requests' callbacks could have run.
 */
function countTurns(): { stop(): number } {
  let turns = 0;
  let stopped = false;
  const turn = () => {
    if (stopped) return;
    turns += 1;
    setImmediate(turn);
  };
  setImmediate(turn);
  return {
    stop() {
      stopped = true;
      return turns;
    },
  };
}

describe("getAccountsByIds on SQLite", () => {
  it("lets the event loop turn between its queries (regression: 50,000 ids held it for 1.2 s)", async () => {
    const store = await openStore(newDatabaseUrl(directory), { owner: true });
    try {
      const chunks = 4;
      const accounts = Array.from({ length: chunks * ACCOUNT_IDS_PER_QUERY }, (_, index) =>
        makeAccount({ name: `account-${index}` }),
      );
      for (const account of accounts) await store.insertAccount(account);

      const turns = countTurns();
      const found = await store.getAccountsByIds(accounts.map((account) => account.id));
      const counted = turns.stop();

      expect(new Set(found.map((account) => account.id))).toEqual(
        new Set(accounts.map((account) => account.id)),
      );
      // A SQLite query runs on this thread and resolves in a microtask: only a turn taken on
      // purpose between chunks lets anything else run.
      expect(counted).toBeGreaterThanOrEqual(chunks - 1);
    } finally {
      await store.close();
    }
  });
});
