import { formatAmount, MoneyFormatError, parseAmount } from "../billing/money.ts";
import type { AccountPage, Store } from "../store/store.ts";
import { CliError, type OutputSink, pacedByReader } from "./cli-error.ts";
import { createAccount } from "./create-account.ts";
import { creditAccount } from "./credit-account.ts";
import { describeAccount } from "./describe-account.ts";
import { dispatchSubcommand, writeSubcommandHelp } from "./dispatch-subcommand.ts";
import { requireAccount } from "./find-account.ts";
import { createTableLayout, formatInstant } from "./format-table.ts";
import { listAccountSummaries } from "./list-account-summaries.ts";
import { parseCommandArguments, stringOption } from "./parse-command-arguments.ts";
import { readPages } from "./read-pages.ts";
import { stringifyForTerminal } from "./show-control-characters.ts";
import { withCliErrors } from "./with-cli-errors.ts";

const USAGE = {
  create: "tollgate accounts create NAME [--balance AMOUNT]",
  list: "tollgate accounts list",
  show: "tollgate accounts show NAME|ID [--format table|json]",
  credit: "tollgate accounts credit NAME|ID AMOUNT [--note TEXT]",
} as const;

const LIST_HINT = "List accounts with `tollgate accounts list`.";

/** Options of {@link runAccountsCommand}. */
export interface AccountsCommandOptions {
  now?: () => Date;
}

/**
 * Writes the usage that `argv` (what follows `accounts`) asks for, and returns whether it did;
 * it needs no store, so the CLI calls it before opening one.
 */
export function writeAccountsHelp(argv: readonly string[], out: OutputSink): boolean {
  return writeSubcommandHelp({ group: "accounts", usage: USAGE, argv, out });
}

/**
 * `tollgate accounts ...`: `argv` holds what follows `accounts` (the dispatcher has already
 * taken out global options such as `--config`). Writes to `out`; throws a {@link CliError} for
 * anything the operator got wrong. Amounts are decimal strings in the account currency.
 */
export async function runAccountsCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: AccountsCommandOptions = {},
): Promise<void> {
  await dispatchSubcommand({
    group: "accounts",
    usage: USAGE,
    argv,
    out,
    handlers: {
      create: (rest) => createCommand(store, rest, out, options),
      list: (rest) => listCommand(store, rest, out),
      show: (rest) => showCommand(store, rest, out),
      credit: (rest) => creditCommand(store, rest, out, options),
    },
  });
}

async function createCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: AccountsCommandOptions,
): Promise<void> {
  const { values, positionals } = parseCommandArguments(argv, {
    options: { balance: { type: "string" } },
    positionals: 1,
    usage: USAGE.create,
  });
  const name = positionals[0] ?? "";
  const balanceText = stringOption(values, "balance");
  const balanceNano = balanceText === undefined ? 0n : parseAmountOption("--balance", balanceText);
  const account = await withCliErrors(() =>
    createAccount(store, { name, balanceNano }, options.now === undefined ? {} : { now: options.now }),
  );
  out.write(
    `Created account ${account.name} (${account.id}) with balance ${formatAmount(account.balanceNano)}.`,
  );
}

/**
 * Reads a decimal amount option or argument; a bad one is a {@link CliError} naming it. `rule`
 * replaces what a negative amount is told (money's "amounts are zero or more"), for an amount
 * that must be more than 0.
 */
function parseAmountOption(label: string, text: string, rule?: string): bigint {
  try {
    return parseAmount(text);
  } catch (error) {
    if (error instanceof MoneyFormatError) {
      const message =
        error.reason === "negative" && rule !== undefined
          ? `${JSON.stringify(text.length > 64 ? `${text.slice(0, 32)}...` : text)} is negative; ${rule}`
          : error.message;
      throw new CliError(`${label}: ${message}.`, { cause: error });
    }
    throw error;
  }
}

async function listCommand(store: Store, argv: readonly string[], out: OutputSink): Promise<void> {
  parseCommandArguments(argv, { options: {}, positionals: 0, usage: USAGE.list });
  const pages = readPages(
    (limit, after: AccountPage["after"]) => listAccountSummaries(store, { limit, after }),
    (last) => ({ createdAt: last.account.createdAt, name: last.account.name }),
  );
  const layout = createTableLayout(["ID", "NAME", "BALANCE", "RESERVED", "SPENT", "CREATED"]);
  let listed = 0;
  for await (const accounts of pacedByReader(pages, out)) {
    listed += accounts.length;
    const rows = accounts.map(({ account, summary }) => [
      account.id,
      account.name,
      summary.balance,
      summary.reserved,
      summary.spent,
      formatInstant(account.createdAt),
    ]);
    for (const line of layout(rows)) out.write(line);
  }
  if (listed === 0) out.write("No accounts yet. Create one with `tollgate accounts create NAME`.");
}

async function showCommand(store: Store, argv: readonly string[], out: OutputSink): Promise<void> {
  const { values, positionals } = parseCommandArguments(argv, {
    options: { format: { type: "string" } },
    positionals: 1,
    usage: USAGE.show,
  });
  const format = stringOption(values, "format") ?? "table";
  if (format !== "table" && format !== "json") {
    throw new CliError(`--format must be table or json, not '${format}'.\nUsage: ${USAGE.show}`);
  }
  const account = await withCliErrors(() => requireAccount(store, positionals[0] ?? ""), {
    notFound: LIST_HINT,
  });
  const summary = await withCliErrors(() => describeAccount(store, account));
  if (format === "json") {
    out.write(stringifyForTerminal(summary));
    return;
  }
  out.write(`id:       ${summary.id}`);
  out.write(`name:     ${summary.name}`);
  out.write(`balance:  ${summary.balance}`);
  out.write(`reserved: ${summary.reserved}`);
  out.write(`spent:    ${summary.spent}`);
  out.write(`created:  ${formatInstant(account.createdAt)}`);
}

async function creditCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: AccountsCommandOptions,
): Promise<void> {
  const { values, positionals } = parseCommandArguments(argv, {
    options: { note: { type: "string" } },
    positionals: 2,
    usage: USAGE.credit,
  });
  const amountNano = parseAmountOption(
    "AMOUNT",
    positionals[1] ?? "",
    "the amount to credit must be more than 0",
  );
  const account = await withCliErrors(() => requireAccount(store, positionals[0] ?? ""), {
    notFound: LIST_HINT,
  });
  const { credit, money } = await withCliErrors(() =>
    creditAccount(
      store,
      { account, amountNano, note: stringOption(values, "note") },
      options.now === undefined ? {} : { now: options.now },
    ),
  );
  // The balance as the credit's own transaction read it: a read after the commit could fail, and
  // an operator told the credit failed would run it again.
  out.write(
    `Credited ${formatAmount(credit.amountNano)} to ${account.name} (${account.id}): balance ${formatAmount(money.balanceNano)}.`,
  );
}
