import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { CliError } from "../../src/admin/cli-error.ts";
import { LISTING_PAGE_ROWS } from "../../src/admin/read-pages.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { AccountPage, Store } from "../../src/store/store.ts";
import { makeAccount, makeReservation, makeSettlement } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
const now = () => new Date("2025-06-01T12:00:00.000Z");
let store: Store;

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
});

afterEach(async () => {
  await store.close();
});

async function run(...argv: string[]): Promise<string[]> {
  const out = collectOutput();
  await runAccountsCommand(store, argv, out, { now });
  return out.lines;
}

/** Settles one request of `costNano` and leaves another reservation of `reservedNano` open. */
async function spend(accountName: string, costNano: bigint, reservedNano: bigint): Promise<void> {
  const account = await store.getAccountByName(accountName);
  if (account === undefined) throw new Error(`no account ${accountName}`);
  const settled = makeReservation({ accountId: account.id, amountNano: costNano });
  await store.reserve(settled);
  await store.settle(makeSettlement(settled, costNano));
  await store.reserve(makeReservation({ accountId: account.id, amountNano: reservedNano }));
}

describe("accounts create", () => {
  it("opens an account with its balance, recorded as its opening credit", async () => {
    const lines = await run("create", "acme", "--balance", "12.5");
    const account = await store.getAccountByName("acme");
    expect(account?.balanceNano).toBe(12_500_000_000n);
    expect(lines).toEqual([`Created account acme (${account?.id}) with balance 12.5.`]);
    expect(await store.listCredits(account?.id ?? "")).toMatchObject([
      { amountNano: 12_500_000_000n, note: "opening balance" },
    ]);
    expect(await store.audit()).toEqual([]);
  });

  it("opens an account with balance 0 by default", async () => {
    await run("create", "acme");
    expect((await store.getAccountByName("acme"))?.balanceNano).toBe(0n);
  });

  it("refuses a duplicate name", async () => {
    await run("create", "acme");
    await expect(run("create", "acme")).rejects.toThrow(
      new CliError('An account named "acme" already exists; choose another name.'),
    );
  });

  it("refuses a name that differs from another only in case, and names the other where one is not found", async () => {
    await run("create", "Zoe", "--balance", "1");
    await expect(run("create", "zoe")).rejects.toThrow(
      new CliError(
        'An account named "Zoe" already exists, and names that differ only in case are refused (a credit to the wrong one would be too easy); choose another name.',
      ),
    );
    expect((await store.listAccounts()).map((account) => account.name)).toEqual(["Zoe"]);
    // Names are matched exactly: a credit to "ZOE" credits nobody, and says whom it may have meant.
    await expect(run("credit", "ZOE", "5")).rejects.toThrow(
      new CliError(
        'No account has the name or id "ZOE". Names match exactly: did you mean "Zoe"? List accounts with `tollgate accounts list`.',
      ),
    );
    expect((await store.getAccountByName("Zoe"))?.balanceNano).toBe(1_000_000_000n);
  });

  it.each([
    ["a negative balance", ["create", "acme", "--balance=-1"], /--balance: "-1" is negative/],
    [
      "a number with an exponent",
      ["create", "acme", "--balance", "1e3"],
      /--balance: "1e3" uses an exponent/,
    ],
    ["more than 64 bits", ["create", "acme", "--balance", "9223372036.854775808"], /too large/],
    ["too many decimals", ["create", "acme", "--balance", "0.0000000001"], /more than 9 decimal places/],
    ["a missing balance value", ["create", "acme", "--balance"], /Option '--balance' needs a value/],
    ["an unknown option", ["create", "acme", "--credit", "5"], /Unknown option '--credit'/],
    [
      "a negative amount, which reads as an option",
      ["credit", "acme", "-5"],
      /'-5' is a negative number, which no argument takes/,
    ],
    ["a missing name", ["create"], /^Missing argument NAME\.\nUsage: tollgate accounts create/],
    ["two names", ["create", "a", "b"], /Unexpected argument 'b'/],
    ["a bad name", ["create", "has space"], /not a valid account name/],
    // "ë" is a letter, but not one a name may have: the rule says which letters (was "letters").
    [
      "a name with a letter outside ASCII",
      ["create", "Zoë"],
      /not a valid account name: use 1 to 64 ASCII letters \(a-z, A-Z\)/,
    ],
    [
      "a name shaped like an id",
      ["create", "00000000-0000-4000-8000-000000000001"],
      /looks like an account id/,
    ],
    [
      "a whole API key as the name",
      ["create", "sk-tg-abcdef123456-SECRETsecret0123"],
      /is an API key; choose a name/,
    ],
  ])("refuses %s with a CliError", async (_case, argv, message) => {
    const error = await run(...argv).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(CliError);
    expect(String((error as Error).message)).toMatch(message);
  });

  it("ends option errors with the usage line", async () => {
    await expect(run("create", "acme", "--credit", "5")).rejects.toThrow(
      /\nUsage: tollgate accounts create NAME \[--balance AMOUNT\]$/,
    );
  });
});

describe("accounts list", () => {
  it("prints a table of every account with its balance, reserved and spent amounts", async () => {
    await run("create", "acme", "--balance", "10");
    await run("create", "beta");
    await spend("acme", 250_000_000n, 400_000_000n);
    const lines = await run("list");
    expect(lines[0]).toMatch(/^ID\s+NAME\s+BALANCE\s+RESERVED\s+SPENT\s+CREATED$/);
    expect(lines[1]?.split(/\s{2,}/).slice(1)).toEqual([
      "acme",
      "9.75",
      "0.4",
      "0.25",
      "2025-06-01T12:00:00Z",
    ]);
    expect(lines[2]?.split(/\s{2,}/).slice(1)).toEqual(["beta", "0", "0", "0", "2025-06-01T12:00:00Z"]);
    expect(lines).toHaveLength(3);
  });

  it("says how to make an account when there is none", async () => {
    expect(await run("list")).toEqual(["No accounts yet. Create one with `tollgate accounts create NAME`."]);
  });

  it("reads a page at a time, every account oldest first, and stops once the reader has gone", async () => {
    const names: string[] = [];
    for (let index = 0; index < LISTING_PAGE_ROWS + 3; index++) {
      const name = `bulk-${String(index).padStart(5, "0")}`;
      names.push(name);
      await store.insertAccount(
        makeAccount({ name, createdAt: new Date(Date.UTC(2025, 0, 1) + index * 1000) }),
      );
    }
    const pages: (AccountPage | undefined)[] = [];
    const listAccountsWithMoney = store.listAccountsWithMoney.bind(store);
    store.listAccountsWithMoney = (page) => {
      pages.push(page);
      return listAccountsWithMoney(page);
    };
    const lines = await run("list");
    expect(lines.slice(1).map((line) => line.split(/\s{2,}/)[1])).toEqual(names);
    expect(pages.map((page) => page?.limit)).toEqual([LISTING_PAGE_ROWS, LISTING_PAGE_ROWS]);

    pages.length = 0;
    await runAccountsCommand(store, ["list"], { write: () => {}, closed: true }, { now });
    expect(pages.map((page) => page?.limit)).toEqual([LISTING_PAGE_ROWS]);
  });
});

describe("accounts show", () => {
  it("shows the real balance, reserved and spent amounts", async () => {
    await run("create", "acme", "--balance", "10");
    await spend("acme", 1_500_000_000n, 2_000_000_000n);
    const account = await store.getAccountByName("acme");
    expect(JSON.parse((await run("show", "acme", "--format", "json"))[0] ?? "")).toEqual({
      id: account?.id,
      name: "acme",
      balance: "8.5",
      reserved: "2",
      spent: "1.5",
    });
    const lines = await run("show", "acme");
    expect(lines).toContain("balance:  8.5");
    expect(lines).toContain("reserved: 2");
    expect(lines).toContain("spent:    1.5");
  });

  it("prints JSON with amounts as decimal strings", async () => {
    await run("create", "acme", "--balance", "0.000000001");
    const account = await store.getAccountByName("acme");
    const lines = await run("show", "acme", "--format", "json");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? "")).toEqual({
      id: account?.id,
      name: "acme",
      balance: "0.000000001",
      reserved: "0",
      spent: "0",
    });
  });

  it("finds the account by id too", async () => {
    await run("create", "acme");
    const id = (await store.getAccountByName("acme"))?.id ?? "";
    const lines = await run("show", id);
    expect(lines).toContain(`id:       ${id}`);
    expect(lines).toContain("name:     acme");
    expect(lines).toContain("balance:  0");
  });

  it("refuses an unknown account and says how to list them", async () => {
    await expect(run("show", "nobody")).rejects.toThrow(
      new CliError('No account has the name or id "nobody". List accounts with `tollgate accounts list`.'),
    );
  });

  it("refuses an unknown format", async () => {
    await run("create", "acme");
    await expect(run("show", "acme", "--format", "yaml")).rejects.toThrow(/--format must be table or json/);
  });
});

describe("accounts credit", () => {
  it("adds money to the balance as a credit with its note", async () => {
    await run("create", "acme", "--balance", "1");
    const account = await store.getAccountByName("acme");
    const lines = await run("credit", "acme", "2.000000001", "--note", "invoice 42");
    expect(lines).toEqual([`Credited 2.000000001 to acme (${account?.id}): balance 3.000000001.`]);
    const credits = await store.listCredits(account?.id ?? "");
    expect(credits).toHaveLength(2);
    expect(credits).toContainEqual(
      expect.objectContaining({ amountNano: 2_000_000_001n, note: "invoice 42", createdAt: now() }),
    );
    expect(await store.audit()).toEqual([]);
  });

  it("says the credit it made from what it wrote, with no read after the commit (regression: an error, and a rerun credited twice)", async () => {
    await run("create", "acme", "--balance", "1");
    // The store takes the credit, then fails every read of an account's money (a failover).
    store.getAccountMoney = () => Promise.reject(new Error("Connection terminated unexpectedly"));
    const lines = await run("credit", "acme", "2");
    const account = await store.getAccountByName("acme");
    expect(lines).toEqual([`Credited 2 to acme (${account?.id}): balance 3.`]);
  });

  it("counts a note's characters as code points: 500 with an emoji fit, 501 do not", async () => {
    await run("create", "acme");
    const note = `${"x".repeat(499)}\u{1F680}`;
    expect(note.length).toBe(501);
    await run("credit", "acme", "1", "--note", note);
    const id = (await store.getAccountByName("acme"))?.id ?? "";
    expect((await store.listCredits(id))[0]?.note).toBe(note);
    await expect(run("credit", "acme", "1", "--note", `x${note}`)).rejects.toThrow(/at most 500 characters/);
    // 500 emoji are 500 characters, though UTF-16 takes 1000 units for them.
    await run("credit", "acme", "1", "--note", "\u{1F600}".repeat(500));
    expect(await store.listCredits(id)).toHaveLength(2);
  });

  it("names an unknown account by the start of what was given (regression: 100 KB came back whole)", async () => {
    await expect(run("credit", "x".repeat(100_000), "1")).rejects.toThrow(
      /^No account has the name or id "x{77}\.\.\."\. List accounts/,
    );
  });

  it("refuses a note that holds a whole API key, and credits nothing", async () => {
    // Only a key's hash is stored; a key pasted into a note would be kept in the ledger for good.
    await run("create", "acme");
    await expect(
      run("credit", "acme", "1", "--note", "refund for sk-tg-abcdef123456-SECRETsecret0123 leak"),
    ).rejects.toThrow(/That note holds an API key/);
    const id = (await store.getAccountByName("acme"))?.id ?? "";
    expect(await store.listCredits(id)).toEqual([]);
    // A key's public id alone names it without its secret.
    await run("credit", "acme", "1", "--note", "refund for key abcdef123456");
    expect(await store.listCredits(id)).toHaveLength(1);
  });

  it("finds the account by id and needs no note", async () => {
    await run("create", "acme");
    const id = (await store.getAccountByName("acme"))?.id ?? "";
    await run("credit", id, "5");
    expect((await store.getAccountById(id))?.balanceNano).toBe(5_000_000_000n);
    expect((await store.listCredits(id))[0]?.note).toBeUndefined();
  });

  it.each([
    ["a zero amount", ["credit", "acme", "0"], /more than 0/],
    [
      "a negative amount",
      ["credit", "acme", "--", "-1"],
      /^AMOUNT: "-1" is negative; the amount to credit must be more than 0\.$/,
    ],
    ["too many decimals", ["credit", "acme", "0.0000000001"], /AMOUNT: .*more than 9 decimal places/],
    ["a missing amount", ["credit", "acme"], /^Missing argument AMOUNT\.\nUsage: tollgate accounts credit/],
    [
      "both arguments missing",
      ["credit"],
      /^Missing arguments NAME\|ID AMOUNT\.\nUsage: tollgate accounts credit/,
    ],
    [
      "an unknown account",
      ["credit", "nobody", "1"],
      /No account has the name or id "nobody". List accounts/,
    ],
    ["a long note", ["credit", "acme", "1", "--note", "x".repeat(501)], /at most 500 characters/],
    ["a balance past the largest amount", ["credit", "acme", "9223372036.854775807"], /largest amount/],
  ])("refuses %s with a CliError, writing nothing", async (_case, argv, message) => {
    await run("create", "acme", "--balance", "1");
    const error = await run(...argv).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toMatch(message);
    expect((await store.getAccountByName("acme"))?.balanceNano).toBe(1_000_000_000n);
  });
});

describe("accounts", () => {
  it("refuses an unknown subcommand with the usage", async () => {
    await expect(run("delete", "acme")).rejects.toThrow(/Unknown subcommand 'accounts delete'.\nUsage:/);
  });

  it("refuses a missing subcommand", async () => {
    await expect(run()).rejects.toThrow(/Missing subcommand/);
  });

  it("prints a subcommand's usage on --help after it, and does nothing else", async () => {
    expect(await run("create", "--help")).toEqual([
      "Usage: tollgate accounts create NAME [--balance AMOUNT]",
    ]);
    expect(await run("credit", "acme", "5", "-h")).toEqual([
      "Usage: tollgate accounts credit NAME|ID AMOUNT [--note TEXT]",
    ]);
    expect(await store.listAccounts()).toEqual([]);
  });

  it("prints the usage on --help", async () => {
    const lines = await run("--help");
    expect(lines[0]).toBe("Usage:");
    expect(lines).toContain("  tollgate accounts show NAME|ID [--format table|json]");
  });
});
