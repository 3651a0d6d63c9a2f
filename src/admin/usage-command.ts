import { formatAmount } from "../billing/money.ts";
import type { Store } from "../store/store.ts";
import { CliError, type OutputSink } from "./cli-error.ts";
import { formatCsv } from "./format-csv.ts";
import { formatInstant, formatTable } from "./format-table.ts";
import { parseCommandArguments, stringOption } from "./parse-command-arguments.ts";
import {
  groupUsage,
  queryUsage,
  renderUsageGroup,
  renderUsageRows,
  tabulateUsage,
  USAGE_GROUPINGS,
  type UsageGroup,
  type UsageGrouping,
  type UsageReport,
} from "./usage-report.ts";
import { withCliErrors } from "./with-cli-errors.ts";

const USAGE =
  "tollgate usage [--account NAME|ID] [--key PUBLIC_ID] [--model M] [--since ISO] [--until ISO] [--group-by day|model|key] [--format table|json|csv]";

const FORMATS = ["table", "json", "csv"] as const;
type UsageFormat = (typeof FORMATS)[number];

/**
 * `tollgate usage ...`: the usage ledger, oldest first, filtered by account, key, model and time
 * (`--since` inclusive, `--until` exclusive; dates are midnight UTC), optionally totalled per
 * day, model or key. `--format json` prints one JSON array (rows as SPEC §11 describes, or group
 * totals); `--format csv` a header line and one line per row. Writes to `out`; throws a
 * {@link CliError} for anything the operator got wrong.
 */
export async function runUsageCommand(store: Store, argv: readonly string[], out: OutputSink): Promise<void> {
  if (argv[0] === "help" || argv[0] === "--help" || argv[0] === "-h") {
    out.write(`Usage: ${USAGE}`);
    return;
  }
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
  const report = await withCliErrors(
    () =>
      queryUsage(store, {
        account: stringOption(values, "account"),
        key: stringOption(values, "key"),
        model: stringOption(values, "model"),
        since: stringOption(values, "since"),
        until: stringOption(values, "until"),
      }),
    { notFound: "List accounts and keys with `tollgate accounts list` and `tollgate keys list`." },
  );
  writeReport(report, grouping, format, out);
}

function readChoice<const T extends readonly string[]>(
  option: string,
  value: string | undefined,
  choices: T,
): T[number] | undefined {
  if (value === undefined) return undefined;
  const choice = choices.find((each) => each === value);
  if (choice !== undefined) return choice;
  throw new CliError(`${option} must be ${choices.join(", ")}, not '${value}'.\nUsage: ${USAGE}`);
}

function writeReport(
  report: UsageReport,
  grouping: UsageGrouping | undefined,
  format: UsageFormat,
  out: OutputSink,
): void {
  switch (format) {
    case "json": {
      const rows =
        grouping === undefined
          ? renderUsageRows(report)
          : groupUsage(report, grouping).map((group) => renderUsageGroup(group, grouping));
      out.write(JSON.stringify(rows));
      return;
    }
    case "csv": {
      const { headers, rows } = tabulateUsage(report, grouping);
      for (const line of formatCsv(headers, rows)) out.write(line);
      return;
    }
    case "table":
      if (report.records.length === 0) {
        out.write("No usage matches these filters.");
        return;
      }
      if (grouping === undefined) writeRowsTable(report, out);
      else writeGroupsTable(groupUsage(report, grouping), grouping, out);
      writeTotal(report, out);
      return;
    default: {
      const unexpected: never = format;
      throw new Error(`Unknown format ${String(unexpected)}`);
    }
  }
}

function writeRowsTable(report: UsageReport, out: OutputSink): void {
  const headers = [
    "CREATED",
    "REQUEST ID",
    "ACCOUNT",
    "KEY",
    "MODEL",
    "PROMPT",
    "COMPLETION",
    "COST",
    "OUTCOME",
  ];
  const rows = report.records.map((record) => [
    formatInstant(record.createdAt),
    record.requestId,
    report.accountNames.get(record.accountId) ?? record.accountId,
    record.keyPublicId,
    record.model,
    `${record.promptTokens}${record.estimated ? "~" : ""}`,
    `${record.completionTokens}${record.estimated ? "~" : ""}`,
    formatAmount(record.costNano),
    record.errorCode ?? record.finishReason ?? "-",
  ]);
  for (const line of formatTable(headers, rows)) out.write(line);
  if (report.records.some((record) => record.estimated)) {
    out.write("~ token counts estimated by Tollgate (the engine reported none).");
  }
}

function writeGroupsTable(groups: UsageGroup[], grouping: UsageGrouping, out: OutputSink): void {
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
}

function writeTotal(report: UsageReport, out: OutputSink): void {
  let promptTokens = 0;
  let completionTokens = 0;
  let costNano = 0n;
  for (const record of report.records) {
    promptTokens += record.promptTokens;
    completionTokens += record.completionTokens;
    costNano += record.costNano;
  }
  const requests = report.records.length;
  out.write(
    `total: ${requests} ${requests === 1 ? "request" : "requests"}, ${promptTokens} prompt and ${completionTokens} completion tokens, cost ${formatAmount(costNano)}`,
  );
}
