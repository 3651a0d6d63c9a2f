import { formatAmount } from "../billing/money.ts";
import type { Store } from "../store/store.ts";
import { USAGE_GROUPINGS, type UsageGrouping } from "../store/usage-query.ts";
import { CliError, type OutputSink, pacedByReader } from "./cli-error.ts";
import { createTableLayout, formatInstant, formatTable } from "./format-table.ts";
import { isHelpRequested, parseCommandArguments, stringOption } from "./parse-command-arguments.ts";
import { parseInstant } from "./parse-instant.ts";
import { showTyped } from "./read-key-reference.ts";
import { stringifyForTerminal } from "./show-control-characters.ts";
import {
  readUsagePages,
  renderUsageGroup,
  renderUsageRow,
  selectUsage,
  sumUsageGroups,
  type UsageGroup,
  type UsageSelection,
  usageCsvLines,
} from "./usage-report.ts";
import { withCliErrors } from "./with-cli-errors.ts";

const USAGE =
  "tollgate usage [--account NAME|ID] [--key PUBLIC_ID|KEY] [--model M] [--since ISO] [--until ISO] [--group-by day|model|key] [--format table|json|csv]";

const FORMATS = ["table", "json", "csv"] as const;

const HELP = `Usage: ${USAGE}

The usage ledger, oldest first. --since is inclusive and --until exclusive: an ISO time such as
2026-05-01T12:00:00Z or 2026-05-01T14:00:00+02:00, or a date alone, which means midnight UTC
(--since 2026-05-01 --until 2026-05-02 is that UTC day). --group-by day totals per UTC day.
Times printed (CREATED, created) are UTC.`;

/**
 * Writes the usage that `argv` (what follows `usage`) asks for, and returns whether it did; it
 * needs no store, so the CLI calls it before opening one.
 */
export function writeUsageHelp(argv: readonly string[], out: OutputSink): boolean {
  if (argv[0] !== "help" && !isHelpRequested(argv, USAGE)) return false;
  out.write(HELP);
  return true;
}

/**
 * `tollgate usage ...`: the usage ledger, oldest first, filtered by account, key, model and time
 * (`--since` inclusive, `--until` exclusive; dates are midnight UTC), optionally totalled per
 * day, model or key (by the store). `--format json` prints one JSON array (rows as SPEC §11
 * describes, one per line, or group totals); `--format csv` a header line and one line per row.
 * Rows are read and written a page at a time, so a ledger of millions of rows prints in constant
 * memory. Writes to `out`; throws a {@link CliError} for anything the operator got wrong.
 */
export async function runUsageCommand(store: Store, argv: readonly string[], out: OutputSink): Promise<void> {
  if (writeUsageHelp(argv, out)) return;
  const { values } = parseCommandArguments(argv, {
    options: {
      account: { type: "string" },
      key: { type: "string" },
      model: { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
      "group-by": { type: "string" },
      format: { type: "string" },
    },
    positionals: 0,
    usage: USAGE,
  });
  const grouping = readChoice("--group-by", stringOption(values, "group-by"), USAGE_GROUPINGS);
  const format = readChoice("--format", stringOption(values, "format"), FORMATS) ?? "table";
  checkTimeOptions(stringOption(values, "since"), stringOption(values, "until"));
  const selection = await withCliErrors(
    () =>
      selectUsage(store, {
        account: stringOption(values, "account"),
        key: stringOption(values, "key"),
        model: stringOption(values, "model"),
        since: stringOption(values, "since"),
        until: stringOption(values, "until"),
      }),
    { notFound: "List accounts and keys with `tollgate accounts list` and `tollgate keys list`." },
  );
  if (format === "csv") {
    for await (const lines of pacedByReader(usageCsvLines(store, selection, grouping), out)) {
      for (const line of lines) out.write(line);
    }
  } else if (grouping !== undefined) {
    const groups = await sumUsageGroups(store, selection, grouping);
    if (format === "json") {
      out.write(stringifyForTerminal(groups.map((group) => renderUsageGroup(group, grouping))));
    } else {
      writeGroupsTable(groups, grouping, out);
    }
  } else if (format === "json") {
    await writeRowsJson(store, selection, out);
  } else {
    await writeRowsTable(store, selection, out);
  }
}

/**
 * Refuses a `--since` or `--until` that is no time, or a `--since` not before `--until`, naming
 * the options as typed: selectUsage, shared with the admin API, names its fields (`since`).
 */
function checkTimeOptions(since: string | undefined, until: string | undefined): void {
  const sinceTime = since === undefined ? undefined : readTimeOption("--since", since);
  const untilTime = until === undefined ? undefined : readTimeOption("--until", until);
  if (sinceTime !== undefined && untilTime !== undefined && sinceTime >= untilTime) {
    throw new CliError("--since must be before --until (--until is exclusive).");
  }
}

function readTimeOption(option: string, text: string): Date {
  try {
    return parseInstant(text);
  } catch (error) {
    throw new CliError(`${option}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

function readChoice<const T extends readonly string[]>(
  option: string,
  value: string | undefined,
  choices: T,
): T[number] | undefined {
  if (value === undefined) return undefined;
  const choice = choices.find((each) => each === value);
  if (choice !== undefined) return choice;
  throw new CliError(`${option} must be ${choices.join(", ")}, not '${showTyped(value)}'.\nUsage: ${USAGE}`);
}

/**
 * An array of rows, one per line: `[`, the rows (each but the last ending with a comma), `]`. The
 * `[` waits for the first page: a store that cannot be opened leaves no output begun.
 */
async function writeRowsJson(store: Store, selection: UsageSelection, out: OutputSink): Promise<void> {
  let begun = false;
  let held: string | undefined;
  for await (const page of pacedByReader(readUsagePages(store, selection), out)) {
    if (!begun) out.write("[");
    begun = true;
    for (const record of page) {
      if (held !== undefined) out.write(`${held},`);
      held = stringifyForTerminal(renderUsageRow(record, selection.accountNames));
    }
  }
  if (!begun) out.write("[");
  if (held !== undefined) out.write(held);
  out.write("]");
}

async function writeRowsTable(store: Store, selection: UsageSelection, out: OutputSink): Promise<void> {
  const layout = createTableLayout([
    "CREATED",
    "REQUEST ID",
    "ACCOUNT",
    "KEY",
    "MODEL",
    "PROMPT",
    "COMPLETION",
    "COST",
    "OUTCOME",
  ]);
  const total: Totals = { requests: 0, promptTokens: 0, completionTokens: 0, costNano: 0n };
  let estimated = false;
  for await (const page of pacedByReader(readUsagePages(store, selection), out)) {
    const rows = page.map((record) => {
      addTo(total, { requests: 1, ...record });
      estimated ||= record.estimated;
      return [
        formatInstant(record.createdAt),
        record.requestId,
        selection.accountNames.get(record.accountId) ?? record.accountId,
        record.keyPublicId,
        record.model,
        `${record.promptTokens}${record.estimated ? "~" : ""}`,
        `${record.completionTokens}${record.estimated ? "~" : ""}`,
        formatAmount(record.costNano),
        record.errorCode ?? record.finishReason ?? "-",
      ];
    });
    for (const line of layout(rows)) out.write(line);
  }
  if (total.requests === 0) {
    out.write(NOTHING_MATCHES);
    return;
  }
  if (estimated) {
    out.write(
      "~ token counts Tollgate estimated (the engine reported none, or a count it could not have used, which was capped).",
    );
  }
  writeTotal(total, out);
}

function writeGroupsTable(groups: UsageGroup[], grouping: UsageGrouping, out: OutputSink): void {
  if (groups.length === 0) {
    out.write(NOTHING_MATCHES);
    return;
  }
  const headers = [
    grouping.toUpperCase(),
    ...(grouping === "key" ? ["ACCOUNT"] : []),
    "REQUESTS",
    "PROMPT",
    "COMPLETION",
    "COST",
  ];
  const rows = groups.map((group) => [
    group.group,
    ...(group.account === undefined ? [] : [group.account]),
    String(group.requests),
    String(group.promptTokens),
    String(group.completionTokens),
    formatAmount(group.costNano),
  ]);
  for (const line of formatTable(headers, rows)) out.write(line);
  const total: Totals = { requests: 0, promptTokens: 0, completionTokens: 0, costNano: 0n };
  for (const group of groups) addTo(total, group);
  writeTotal(total, out);
}

const NOTHING_MATCHES = "No usage matches these filters.";

type Totals = Pick<UsageGroup, "requests" | "promptTokens" | "completionTokens" | "costNano">;

function addTo(total: Totals, more: Totals): void {
  total.requests += more.requests;
  total.promptTokens += more.promptTokens;
  total.completionTokens += more.completionTokens;
  total.costNano += more.costNano;
}

function writeTotal(total: Totals, out: OutputSink): void {
  const { requests, promptTokens, completionTokens, costNano } = total;
  out.write(
    `total: ${requests} ${requests === 1 ? "request" : "requests"}, ${promptTokens} prompt and ${completionTokens} completion tokens, cost ${formatAmount(costNano)}`,
  );
}
