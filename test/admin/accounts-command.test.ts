import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { CliError } from "../../src/admin/cli-error.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
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

describe("accounts create", () => {
  it("opens an account with its balance", async () => {
    const lines = await run("create", "acme", "--balance", "12.5");
    const account = await store.getAccountByName("acme");
    expect(account?.balanceNano).toBe(12_500_000_000n);
    expect(lines).toEqual([`Created account acme (${account?.id}) with balance 12.5.`]);
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

  it.each([
    ["a negative balance", ["create", "acme", "--balance=-1"], /--balance: "-1" is not an amount/],
    ["too many decimals", ["create", "acme", "--balance", "0.0000000001"], /more than 9 decimal places/],
    ["a missing balance value", ["create", "acme", "--balance"], /Option '--balance' needs a value/],
    ["an unknown option", ["create", "acme", "--credit", "5"], /Unknown option '--credit'/],
    ["a missing name", ["create"], /Missing argument/],
    ["two names", ["create", "a", "b"], /Unexpected argument 'b'/],
    ["a bad name", ["create", "has space"], /not a valid account name/],
    [
      "a name shaped like an id",
      ["create", "00000000-0000-4000-8000-000000000001"],
      /looks like an account id/,
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
  it("prints a table of every account", async () => {
    await run("create", "acme", "--balance", "10");
    await run("create", "beta");
    const lines = await run("list");
    expect(lines[0]).toMatch(/^ID\s+NAME\s+BALANCE\s+CREATED$/);
    expect(lines[1]).toMatch(/^[0-9a-f-]{36} {2}acme {2}10\s+2025-06-01T12:00:00Z$/);
    expect(lines[2]).toMatch(/^[0-9a-f-]{36} {2}beta {2}0\s+2025-06-01T12:00:00Z$/);
    expect(lines).toHaveLength(3);
  });

  it("says how to make an account when there is none", async () => {
    expect(await run("list")).toEqual(["No accounts yet. Create one with `tollgate accounts create NAME`."]);
  });
});

describe("accounts show", () => {
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

describe("accounts", () => {
  it("refuses an unknown subcommand with the usage", async () => {
    await expect(run("delete", "acme")).rejects.toThrow(/Unknown subcommand 'accounts delete'.\nUsage:/);
  });

  it("refuses a missing subcommand", async () => {
    await expect(run()).rejects.toThrow(/Missing subcommand/);
  });

  it("prints the usage on --help", async () => {
    const lines = await run("--help");
    expect(lines[0]).toBe("Usage:");
    expect(lines).toContain("  tollgate accounts show NAME|ID [--format table|json]");
  });
});
