/**
 * Messages that repeat what an operator typed hide a key's secret before they cut the text to
 * length. Regression: they cut first (at 80 characters, or 32 for amounts), and a cut that fell
 * within the first 8 characters of a secret left 1 to 7 of them, which the CLI's last pass
 * (hideKeySecrets, which needs 8 to tell a secret from a word) then let through.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { validateAccountName } from "../../src/admin/create-account.ts";
import { requireAccount } from "../../src/admin/find-account.ts";
import { runKeysCommand } from "../../src/admin/keys-command.ts";
import { parseInstant } from "../../src/admin/parse-instant.ts";
import { runUsageCommand } from "../../src/admin/usage-command.ts";
import { parseAmount } from "../../src/billing/money.ts";
import { runModelsPullCommand } from "../../src/models/pull-command.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { createTestConfig } from "../support/test-server.ts";
import { collectOutput } from "./cli-output.ts";

const KEY = "sk-tg-abc123def456-Q7w9Zx2Lm4Np8Rt6Vy1Bc3Df5Gh7Jk9";
/** Any character of the secret after its key's public id. */
const SECRET_SHOWN = /sk-tg-abc123def456-[A-Za-z0-9]/;

const directory = makeTemporaryDirectory();
let store: Store;

beforeAll(async () => {
  store = await openStore(newDatabaseUrl(directory));
  await runAccountsCommand(store, ["create", "acme"], collectOutput());
});

afterAll(async () => {
  await store.close();
});

const config = createTestConfig({ database: "sqlite::memory:", models: [] });

/** The message `action` fails with. */
async function messageOf(action: () => unknown): Promise<string> {
  try {
    await action();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  throw new Error("the action did not fail");
}

const sites: [string, (text: string) => unknown][] = [
  ["a date (parseInstant)", (text) => parseInstant(text)],
  [
    "keys create --rpm",
    (text) => runKeysCommand(store, ["create", "--account", "acme", "--rpm", text], collectOutput()),
  ],
  ["usage --format", (text) => runUsageCommand(store, ["--format", text], collectOutput())],
  ["an account's name or id", (text) => requireAccount(store, text)],
  ["a new account's name", (text) => validateAccountName(`${text}!`)],
  ["an amount", (text) => parseAmount(`${text}!`)],
  ["models pull", (text) => runModelsPullCommand(config, [text], collectOutput(), { env: {} })],
];

describe("a key's secret in a value a message repeats", () => {
  it.each(sites)("%s: hidden wherever the cut falls", async (_site, action) => {
    const shown: string[] = [];
    for (let before = 0; before <= 100; before++) {
      const message = await messageOf(() => action(`${"x".repeat(before)}${KEY}`));
      if (SECRET_SHOWN.test(message)) shown.push(`${before}: ${message}`);
    }
    expect(shown).toEqual([]);
  });

  it("is hidden, not dropped: the message still names the key's public id where it is whole", async () => {
    expect(await messageOf(() => parseInstant(`x${KEY}`))).toContain('"xsk-tg-abc123def456-..."');
    expect(await messageOf(() => parseAmount(`${"x".repeat(8)}${KEY}${"x".repeat(30)}`))).toContain(
      '"xxxxxxxxsk-tg-abc123def456-..."',
    );
  });
});
