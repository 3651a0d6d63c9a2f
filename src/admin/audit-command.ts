import { existsSync } from "node:fs";
import { ChargeJournal } from "../billing/charge-journal.ts";
import { formatAmount } from "../billing/money.ts";
import type { AuditProblem } from "../store/audit-problem.ts";
import { MAX_BIGINT_COLUMN } from "../store/column-values.ts";
import type { Store } from "../store/store.ts";
import type { OutputSink } from "./cli-error.ts";
import { formatInstant } from "./format-table.ts";
import { isHelpRequested, parseCommandArguments } from "./parse-command-arguments.ts";

const USAGE = "tollgate audit [--repair-spent]";

/** What {@link runAuditCommand} found: `ok` is false when it reported a problem. */
export interface AuditOutcome {
  ok: boolean;
  /** Every problem found, in the order reported. */
  problems: AuditProblem[];
}

/**
 * Writes the usage that `argv` (what follows `audit`) asks for, and returns whether it did; it
 * needs no store, so the CLI calls it before opening one.
 */
export function writeAuditHelp(argv: readonly string[], out: OutputSink): boolean {
  if (argv[0] !== "help" && !isHelpRequested(argv, USAGE)) return false;
  out.write(`Usage: ${USAGE}`);
  return true;
}

/**
 * `tollgate audit`: checks that every balance equals its credits minus its settled charges, that
 * every account's reserved amount equals its open reservations, and that no reservation is open
 * (SPEC §11: it is meant to run while no request is in flight, so every open reservation counts
 * as left over). With `--repair-spent` it first sets the spent amounts that disagree with the
 * charges (see `Store.repairSpent`) and says which. Prints `audit passed: ...` or a report of each problem; never throws for a
 * problem found: the dispatcher sets exit code 1 when `ok` is false. Throws a `CliError` for bad
 * arguments.
 */
export async function runAuditCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  /** A SQLite database's charge journal (`chargeJournalPath`): charges owed there are told of. */
  journal?: string,
): Promise<AuditOutcome> {
  if (writeAuditHelp(argv, out)) return { ok: true, problems: [] };
  const { values } = parseCommandArguments(argv, {
    options: { "repair-spent": { type: "boolean" } },
    positionals: 0,
    usage: USAGE,
  });
  // Spent amounts a server of an older version left behind after an upgrade: set from the charges.
  const repairs = values["repair-spent"] === true ? await store.repairSpent() : [];
  const [problems, accounts] = await Promise.all([store.audit(), store.listAccounts()]);
  const names = new Map(accounts.map((account) => [account.id, account.name]));
  const describe = (accountId: string) => `account ${names.get(accountId) ?? "(unknown)"} (${accountId})`;
  for (const repair of repairs) {
    out.write(
      `repaired spent: ${describe(repair.accountId)} from ${formatAmount(repair.fromNano)} to ${formatAmount(repair.toNano)}, ${repair.toNano === MAX_BIGINT_COLUMN ? "the most it holds (its charges sum to more)" : "the sum of its charges"}`,
    );
  }
  // Consistent without them, but not final: the balances lack what the journal holds.
  const owed = journal === undefined ? [] : describeJournal(journal);
  if (problems.length === 0) {
    out.write(`audit passed: ${count(accounts.length, "account")}, no open reservations`);
    for (const line of owed) out.write(line);
    return { ok: true, problems };
  }
  const troubled = new Set(
    problems.map((problem) =>
      problem.kind === "open_reservation" ? problem.reservation.accountId : problem.accountId,
    ),
  );
  out.write(
    `audit failed: ${count(problems.length, "problem")} in ${troubled.size} of ${count(accounts.length, "account")}`,
  );
  for (const problem of problems) out.write(`  ${describeProblem(problem, describe)}`);
  if (problems.some((problem) => problem.kind === "open_reservation")) {
    out.write(
      "Open reservations belong to requests in flight, or were left by a server that stopped without settling; a server releases its own when it starts. Run the audit while no request is in flight.",
    );
  }
  for (const line of owed) out.write(line);
  return { ok: false, problems };
}

function describeProblem(problem: AuditProblem, describe: (accountId: string) => string): string {
  switch (problem.kind) {
    case "balance_mismatch":
      return `balance mismatch: ${describe(problem.accountId)} has balance ${formatAmount(problem.balanceNano)}, but its credits minus its charges are ${formatAmount(problem.expectedNano)} (difference ${formatAmount(problem.balanceNano - problem.expectedNano)})`;
    case "spent_mismatch":
      return `spent mismatch: ${describe(problem.accountId)} has spent ${formatAmount(problem.spentNano)}, but its charges sum to ${formatAmount(problem.expectedNano)}`;
    case "reserved_mismatch":
      return `reserved mismatch: ${describe(problem.accountId)} has ${formatAmount(problem.reservedNano)} reserved, but its open reservations sum to ${formatAmount(problem.expectedNano)}`;
    case "open_reservation": {
      const { reservation } = problem;
      return `open reservation: ${reservation.id} (request ${reservation.requestId}) of ${describe(reservation.accountId)}, key ${reservation.keyPublicId}, model ${reservation.model}, amount ${formatAmount(reservation.amountNano)}, replica ${reservation.replicaId}, made ${formatInstant(reservation.createdAt)}, lease until ${formatInstant(reservation.leaseExpiresAt)}`;
    }
    default: {
      const unexpected: never = problem;
      throw new Error(`Unknown audit problem ${String((unexpected as { kind: unknown }).kind)}`);
    }
  }
}

/**
 * What the charge journal beside a SQLite database says of charges the balances lack: those it
 * holds as owed, lines a start could not read, and lines an earlier start kept aside.
 */
function describeJournal(journal: string): string[] {
  const lines: string[] = [];
  if (existsSync(journal)) {
    const reading = new ChargeJournal(journal);
    const owed = reading.readOwed().length;
    if (owed > 0)
      lines.push(
        `${journal} holds ${count(owed, "charge")} the store has not taken yet (it was locked, full or read-only): not in these balances. The server records them once it can write (or at its next start).`,
      );
    if (reading.unreadable.length > 0)
      lines.push(
        `${journal} has ${count(reading.unreadable.length, "line")} that cannot be read: the next start keeps them aside in ${journal}.unreadable.`,
      );
  }
  if (existsSync(`${journal}.unreadable`))
    lines.push(
      `${journal}.unreadable holds lines of the charge journal a start could not read: record by hand any charge they hold.`,
    );
  return lines;
}

function count(value: number, noun: string): string {
  return `${value} ${value === 1 ? noun : `${noun}s`}`;
}
