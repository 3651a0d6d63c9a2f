#!/usr/bin/env node
// First: Node 22 warns on stderr as a command first loads node:sqlite (see the module).
import "./process/drop-sqlite-warning.ts";
import { once } from "node:events";
import { CliError } from "./admin/cli-error.ts";
import { describeStoreCommand } from "./admin/describe-store-command.ts";
import { hideKeySecrets } from "./admin/read-key-reference.ts";
import { showControlCharacters } from "./admin/show-control-characters.ts";
import type { Config } from "./catalog/catalog.ts";
import { loadConfig } from "./catalog/load-config.ts";
import type { Store } from "./store/store.ts";

// Each command imports what it runs when it runs (its module: ./serve-command.ts,
// ./admin/*-command.ts, ./models/models-command.ts): `serve` does not hold the admin commands, the
// model downloader or the test-model writer in memory, and an admin command does not load the
// HTTP server.

const USAGE = `Usage: tollgate <command> [options]

Commands:
  serve [--config FILE] [--host H] [--port N]      run the API server (default http://127.0.0.1:8080/v1)
  accounts create NAME [--balance AMOUNT]           create an account
  accounts list                                     list accounts
  accounts show NAME|ID [--format table|json]       show one account: balance, reserved, spent
  accounts credit NAME|ID AMOUNT [--note TEXT]      add credit to an account
  keys create --account NAME|ID [--name N] [--models a,b] [--rpm N] [--tpm N] [--expires ISO]
                                                    create an API key (printed once)
  keys list [--account NAME|ID]                     list keys (never their secrets)
  keys revoke ID                                    revoke a key by public id or whole key
  keys update ID [--name N] [--models a,b|--all-models] [--rpm N|--no-rpm] [--tpm N|--no-tpm]
                 [--expires ISO|--no-expiry]        change a key's settings in place
  usage [--account NAME|ID] [--key PUBLIC_ID|KEY] [--model M] [--since ISO] [--until ISO]
        [--group-by day|model|key] [--format table|json|csv]
                                                    the usage ledger
  audit [--repair-spent]                            check balances against credits and charges;
                                                    exit 1 with a report where they disagree,
                                                    2 where the check could not run
  backup FILE|FOLDER/                               copy the SQLite database to a new FILE (or a new
                                                    file named for the time in FOLDER), while serving
  restore FILE                                      replace the SQLite database with a backup;
                                                    the server must be stopped
  models list                                       list the catalogue
  models pull ID|URI                                download a model into the models folder (resumable)
  models make-test FILE [--seed N] [--size tiny|small]
                                                    write a tiny random-weight GGUF for tests and demos

Every command accepts --config FILE (else TOLLGATE_CONFIG, else ./tollgate.yaml, else the built-in catalogue),
and --help (or -h) wherever an option may stand for its usage. Give each option once.`;

/** The commands that answer `--help` with their own usage. */
const COMMANDS_WITH_HELP = new Set([
  "serve",
  "accounts",
  "keys",
  "usage",
  "audit",
  "backup",
  "restore",
  "models",
]);
/** Those of them that take a subcommand (`keys list`). */
const COMMAND_GROUPS = new Set(["accounts", "keys", "models"]);

/**
 * Takes `--config FILE` / `--config=FILE` out of the arguments, wherever it stands. An empty path
 * (`--config "$CONF"` with CONF unset) is refused, not taken for no `--config`: that read
 * ./tollgate.yaml or made a new default database. Given twice it is refused too, as any option is.
 * As for every option, no word starting with `--` is its value written apart: `--config --help`
 * prints the usage, and `--config --format json` is refused (it read a file named `--format`).
 */
function extractConfigOption(argv: string[]): { file: string | undefined; rest: string[] } {
  const rest: string[] = [];
  let file: string | undefined;
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!;
    let given: string | undefined;
    if (argument === "--config") {
      const next = argv[index + 1];
      if (next === "--help") continue;
      if (next?.startsWith("--") === true)
        throw new CliError('--config needs a file path (write --config=FILE for one that starts with "--")');
      given = argv[++index];
    } else if (argument.startsWith("--config=")) given = argument.slice("--config=".length);
    else {
      rest.push(argument);
      continue;
    }
    if (given === undefined || given === "") throw new CliError("--config needs a file path");
    if (file !== undefined) throw new CliError("--config is given twice; give it once");
    file = given;
  }
  return { file, rest };
}

/**
 * A reader that stops early (`tollgate usage | head`) closes the pipe: the rest of the output is
 * dropped, quietly, and the command still runs to its end and its exit code (audit's included),
 * but for the reading of further pages that no one would see (`pacedByReader`).
 */
let outputClosed = false;
/** `audit`'s exit code where it could not check (1 says the ledger disagrees). */
const AUDIT_NOT_RUN_EXIT_CODE = 2;

/** Lines written to stdout so far: a command that fails half-way says its output is cut short. */
let linesWritten = 0;
/** The store command running (`withStore`), for what a failed write of its output says. */
let runningStoreCommand: ReturnType<typeof describeStoreCommand> | undefined;
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  outputClosed = true;
  if (error.code === "EPIPE" || error.code === "ERR_STREAM_DESTROYED") return;
  // Output that cannot be written (`> /dev/full`, a full disk) is lost, not dropped on request:
  // the command goes on to its end (what it stores is stored) but fails, saying why, and that a
  // change it prints after making it is made (it said only that the output was lost).
  process.stderr.write(
    `tollgate: could not write the output (${error.message}); what the command printed is lost${describeMadeChange(runningStoreCommand)}\n`,
  );
  // audit's 1 says the ledger disagrees: its report lost is a check that did not run.
  process.exitCode = runningStoreCommand?.command.startsWith("audit") === true ? AUDIT_NOT_RUN_EXIT_CODE : 1;
});

// A terminal gone (a dropped SSH session) or a closed pipe takes what the command says on stderr:
// lost, but the command ends as it would have (regression: `models pull` stopped by SIGHUP exited
// 1 instead of 129 when its message could not be written).
process.stderr.on("error", () => {});

function describeMadeChange(command: ReturnType<typeof describeStoreCommand> | undefined): string {
  if (command?.effect !== "writes") return "";
  const see = command.check === undefined ? "" : ` (see it with ${command.check})`;
  switch (command.command) {
    case "keys create":
      return `, but the key is made${see}: its secret was in that output, so revoke the key and create another.`;
    case "keys revoke":
      // True whether this run revoked it or found it revoked ("the change is made" was not).
      return `, but the key is revoked${see}.`;
    default:
      return `, but the change is made${see}.`;
  }
}
const out = {
  write: (line: string) => {
    if (outputClosed) return;
    process.stdout.write(`${line}\n`);
    linesWritten += line.split("\n").length;
  },
  get closed() {
    return outputClosed;
  },
  async drained() {
    if (outputClosed || !process.stdout.writableNeedDrain) return;
    // The reader takes what is buffered (drain), or goes (close; an EPIPE is handled above).
    const settled = new AbortController();
    await Promise.race([
      once(process.stdout, "drain", { signal: settled.signal }),
      once(process.stdout, "close", { signal: settled.signal }),
    ]).catch(() => {});
    settled.abort();
  },
};

/**
 * Publishes on the servers' invalidation channel that a key changed, so every replica drops it
 * at once rather than within its 1-second cache; an unreachable Redis is said on stderr.
 */
async function tellServersKeyChanged(redisUrl: string, publicId: string): Promise<void> {
  const { notifyReplicas } = await import("./cluster/notify-replicas.ts");
  const { readRedisPrefix } = await import("./cluster/cluster-settings.ts");
  const say = (_object: object, message?: string) => {
    if (message !== undefined) process.stderr.write(`tollgate: ${message}\n`);
  };
  await notifyReplicas({
    url: redisUrl,
    prefix: readRedisPrefix(process.env),
    event: { type: "key-changed", publicId },
    logger: { info: () => {}, warn: say, error: say },
  });
}

/**
 * Runs the store command `command ARGS` on the store its config names. Says on stderr when
 * `TOLLGATE_DATABASE_URL` chose another database than the config file's; a failure of the store
 * under the command is told with what failed, whether anything was changed and whether the output
 * is complete (admin/explain-store-failure.ts).
 */
async function withStore<T>(
  configFile: string | undefined,
  command: { name: string; args: readonly string[] },
  run: (store: Store, config: Config) => Promise<T>,
) {
  const config = await loadConfig({ file: configFile, purpose: "command" });
  const { describeDatabaseOverride } = await import("./admin/describe-database-override.ts");
  const override = describeDatabaseOverride(config);
  if (override !== undefined) process.stderr.write(`tollgate: ${override}\n`);
  const { refuseMemoryDatabase } = await import("./admin/refuse-memory-database.ts");
  refuseMemoryDatabase(config.database, command.name);
  const { openStore } = await import("./store/open-store.ts");
  const { describeNewDatabase, describeNewPostgresStore, findMissingDatabaseFile } = await import(
    "./admin/describe-new-database.ts"
  );
  const { openStoreLazily } = await import("./admin/open-store-lazily.ts");
  // Opened once the command has checked its arguments and calls it: a refused command creates
  // no database (open-store-lazily.ts).
  const lazy = openStoreLazily(async () => {
    const missing = findMissingDatabaseFile(config.database);
    // A database an older version made is left to `serve` to migrate (see StoreOptions.upgrade).
    // Accounts and keys it makes take the database's time, as the servers' do (StoreOptions.stampCreations).
    let created = false;
    const store = await openStore(config.database, {
      upgrade: false,
      stampCreations: true,
      onMigrating: (migrating) => {
        created ||= migrating.created;
      },
    });
    if (missing !== undefined) process.stderr.write(`tollgate: ${describeNewDatabase(missing, config)}\n`);
    else if (created && !config.database.startsWith("sqlite:"))
      process.stderr.write(`tollgate: ${describeNewPostgresStore(config.database, config)}\n`);
    return store;
  });
  const started = performance.now();
  runningStoreCommand = describeStoreCommand(command.name, command.args, configFile);
  try {
    return await run(lazy.store, config);
  } catch (error) {
    // A store that could not be opened changed nothing: said as opening says it.
    if (error === lazy.openError) throw error;
    const { explainStoreFailure } = await import("./admin/explain-store-failure.ts");
    throw explainStoreFailure(error, {
      database: config.database,
      ...runningStoreCommand,
      linesWritten,
      elapsedMs: performance.now() - started,
    });
  } finally {
    await lazy.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const { file, rest } = extractConfigOption(argv);
  const [command, ...args] = rest;
  switch (command) {
    case "serve": {
      const { runServeCommand } = await import("./serve-command.ts");
      return runServeCommand(args, file, out);
    }
    // Each store command answers --help before the config is read or the store opened: help
    // must work where neither does yet, and must not create a database.
    case "accounts": {
      const { runAccountsCommand, writeAccountsHelp } = await import("./admin/accounts-command.ts");
      if (writeAccountsHelp(args, out)) return;
      return withStore(file, { name: command, args }, (store) => runAccountsCommand(store, args, out));
    }
    case "keys": {
      const { runKeysCommand, writeKeysHelp } = await import("./admin/keys-command.ts");
      if (writeKeysHelp(args, out)) return;
      return withStore(file, { name: command, args }, async (store, config) => {
        const redis = config.redis;
        const { nameAdminKeySource } = await import("./admin/name-admin-key-source.ts");
        return runKeysCommand(store, args, out, {
          knownModels: config.models.map((model) => model.id),
          ...(config.adminKey === undefined
            ? {}
            : { configuredAdminKey: { key: config.adminKey, source: nameAdminKeySource(config.source) } }),
          ...(redis === undefined
            ? {}
            : { afterKeyChanged: (publicId) => tellServersKeyChanged(redis, publicId) }),
        });
      });
    }
    case "usage": {
      const { runUsageCommand, writeUsageHelp } = await import("./admin/usage-command.ts");
      if (writeUsageHelp(args, out)) return;
      return withStore(file, { name: command, args }, (store) => runUsageCommand(store, args, out));
    }
    case "audit": {
      const { runAuditCommand, writeAuditHelp } = await import("./admin/audit-command.ts");
      if (writeAuditHelp(args, out)) return;
      const { chargeJournalPath } = await import("./store/open-store.ts");
      let result: Awaited<ReturnType<typeof runAuditCommand>>;
      try {
        result = await withStore(file, { name: command, args }, (store, config) =>
          runAuditCommand(store, args, out, chargeJournalPath(config.database)),
        );
      } catch (error) {
        // 1 is the ledger's disagreement: a check that could not run (a store out of reach, a
        // typo) paged a cron job's `audit || alert "ledger mismatch"` as one.
        throw error instanceof CliError && error.exitCode !== undefined
          ? error
          : new CliError(error instanceof Error ? error.message : String(error), {
              cause: error,
              exitCode: AUDIT_NOT_RUN_EXIT_CODE,
            });
      }
      if (!result.ok) process.exitCode = 1;
      return;
    }
    // Backup and restore copy the SQLite file through SQLite rather than use the store: they read
    // the config themselves.
    case "backup": {
      const { runBackupCommand } = await import("./admin/backup-command.ts");
      return runBackupCommand(args, file, out);
    }
    case "restore": {
      const { runRestoreCommand } = await import("./admin/restore-command.ts");
      return runRestoreCommand(args, file, out);
    }
    case "models": {
      const { runModelsCommand } = await import("./models/models-command.ts");
      return runModelsCommand(args, file, out);
    }
    case "help":
    case "--help":
    case "-h": {
      // `tollgate help keys create` is `tollgate keys create --help`, whatever follows: passed on,
      // `help accounts credit acme 5 --note` read the added --help as the note, and credited.
      const [topic, subcommand] = args;
      if (topic !== undefined && COMMANDS_WITH_HELP.has(topic)) {
        const words = COMMAND_GROUPS.has(topic) && subcommand !== undefined ? [topic, subcommand] : [topic];
        return main([...words, "--help"]);
      }
      // A topic that is no command is said to be one, as an unknown command is.
      if (topic !== undefined && !["help", "--help", "-h"].includes(topic))
        throw new CliError(`unknown command '${topic}'\n\n${USAGE}`);
      out.write(USAGE);
      return;
    }
    case undefined:
      out.write(USAGE);
      return;
    default: {
      // `tollgate --port 9000 serve`: only --config may come before the command.
      const at = args.findIndex((argument) => COMMANDS_WITH_HELP.has(argument));
      if (command.startsWith("-") && at >= 0) {
        // `tollgate --account acme keys list` goes after `keys list`, the subcommand included.
        const [name = "", sub] = args.slice(at);
        const named =
          sub === undefined || sub.startsWith("-") || !COMMAND_GROUPS.has(name) ? name : `${name} ${sub}`;
        throw new CliError(
          `'${command}' goes after the command: tollgate ${named} ${command} ... (only --config may come before it)`,
        );
      }
      throw new CliError(`unknown command '${command}'\n\n${USAGE}`);
    }
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  // An error may repeat what the operator typed, or a name an API client chose: a key pasted in
  // the wrong place keeps its secret, and an escape sequence does not reach the terminal raw.
  const message = showControlCharacters(
    hideKeySecrets(error instanceof Error ? error.message : String(error)),
  );
  process.stderr.write(`tollgate: ${message}\n`);
  process.exitCode = error instanceof CliError ? (error.exitCode ?? 1) : 1;
});
