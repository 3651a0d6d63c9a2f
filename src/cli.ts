#!/usr/bin/env node
// First: Node 22 warns on stderr as a command first loads node:sqlite (see the module).
import "./process/drop-sqlite-warning.ts";
import { once } from "node:events";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { CliError } from "./admin/cli-error.ts";
import { dispatchSubcommand } from "./admin/dispatch-subcommand.ts";
import {
  listUnappliedConfigChanges,
  type UnappliedConfigChangesOptions,
} from "./admin/list-unapplied-config-changes.ts";
import {
  isHelpRequested,
  parseCommandArguments,
  readWholeNumber,
  stringOption,
} from "./admin/parse-command-arguments.ts";
import { quoteForShell } from "./admin/quote-for-shell.ts";
import { hideKeySecrets } from "./admin/read-key-reference.ts";
import { showControlCharacters } from "./admin/show-control-characters.ts";
import { formatAmount } from "./billing/money.ts";
import type { Config } from "./catalog/catalog.ts";
import { loadConfig } from "./catalog/load-config.ts";
import { redactUrlsInText } from "./models/download/redact-url.ts";
import type { RunningServer } from "./server.ts";
import type { Store } from "./store/store.ts";

// Each command imports what it runs when it runs: `serve` does not hold the admin commands, the
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
                                                    exit 1 with a report where they disagree
  models list                                       list the catalogue
  models pull ID|URI                                download a model into the models folder (resumable)
  models make-test FILE [--seed N] [--size tiny|small]
                                                    write a tiny random-weight GGUF for tests and demos

Every command accepts --config FILE (else TOLLGATE_CONFIG, else ./tollgate.yaml, else the built-in catalogue),
and --help (or -h) anywhere for its usage.`;

/** The commands that answer `--help` with their own usage. */
const COMMANDS_WITH_HELP = new Set(["serve", "accounts", "keys", "usage", "audit", "models"]);
/** Those of them that take a subcommand (`keys list`). */
const COMMAND_GROUPS = new Set(["accounts", "keys", "models"]);

const SERVE_USAGE = "tollgate serve [--config FILE] [--host H] [--port N]";

const MODELS_USAGE = {
  list: "tollgate models list",
  pull: "tollgate models pull ID|URI",
  "make-test": "tollgate models make-test FILE [--seed N] [--size tiny|small]",
} as const;

/** Takes `--config FILE` / `--config=FILE` out of the arguments, wherever it stands. */
function extractConfigOption(argv: string[]): { file: string | undefined; rest: string[] } {
  const rest: string[] = [];
  let file: string | undefined;
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!;
    if (argument === "--config") {
      file = argv[++index];
      if (file === undefined) throw new CliError("--config needs a file path");
    } else if (argument.startsWith("--config=")) {
      file = argument.slice("--config=".length);
    } else {
      rest.push(argument);
    }
  }
  return { file, rest };
}

/**
 * A reader that stops early (`tollgate usage | head`) closes the pipe: the rest of the output is
 * dropped, quietly, and the command still runs to its end and its exit code (audit's included),
 * but for the reading of further pages that no one would see (`pacedByReader`).
 */
let outputClosed = false;
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  outputClosed = true;
  if (error.code === "EPIPE" || error.code === "ERR_STREAM_DESTROYED") return;
  // Output that cannot be written (`> /dev/full`, a full disk) is lost, not dropped on request:
  // the command goes on to its end (what it stores is stored) but fails, saying why.
  process.stderr.write(
    `tollgate: could not write the output (${error.message}); what the command printed is lost\n`,
  );
  process.exitCode = 1;
});
const out = {
  write: (line: string) => {
    if (!outputClosed) process.stdout.write(`${line}\n`);
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

async function serve(argv: string[], configFile: string | undefined): Promise<void> {
  if (isHelpRequested(argv)) {
    out.write(`Usage: ${SERVE_USAGE}`);
    return;
  }
  const { values } = parseCommandArguments(argv, {
    options: { host: { type: "string" }, port: { type: "string" } },
    positionals: 0,
    usage: SERVE_USAGE,
  });
  const host = readHostOption(stringOption(values, "host"));
  const port = readPortOption(stringOption(values, "port"));
  // A crash is a JSON line at level fatal, and stops the server once it runs (see the module).
  const { exitOnCrash } = await import("./process/exit-on-crash.ts");
  const crash = exitOnCrash();
  // SIGHUP re-reads the config this command would read at start (SPEC §11) and swaps in its
  // catalogue and prices. The handler goes in before anything else: without one, a SIGHUP ends
  // the process (its default action), and a start takes a second or more. One that comes while
  // the server starts is done once it has started.
  let reload: (() => void) | undefined;
  let reloadWhenStarted = false;
  process.on("SIGHUP", () => {
    if (reload === undefined) reloadWhenStarted = true;
    else reload();
  });
  // SIGTERM and SIGINT likewise: one that comes while the server starts (its store claimed, its
  // port not yet open) would end the process at once with 143; it shuts down once started.
  let shutdown: ((signal: string) => void) | undefined;
  let signalWhileStarting: string | undefined;
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (shutdown === undefined) signalWhileStarting ??= signal;
      else shutdown(signal);
    });
  }
  const config = await loadConfig({ file: configFile });
  const { STARTER_BALANCE_NANO, startServer } = await import("./server.ts");
  const server = await startServer({
    config,
    ...(host === undefined ? {} : { host }),
    ...(port === undefined ? {} : { port }),
  });
  const { adminKey, starterKey } = server.createdKeys;
  if (starterKey !== undefined || adminKey !== undefined) {
    const model = config.models.find((entry) => entry.kind === "chat")?.id ?? "MODEL";
    out.write("");
    out.write(
      starterKey === undefined
        ? "Created an admin key (the store had none that works). It is shown once; keep it safe."
        : "First start: created these keys. They are shown once; keep them safe.",
    );
    if (adminKey !== undefined) out.write(`  admin key:   ${adminKey}`);
    if (starterKey !== undefined) {
      out.write(
        `  starter key: ${starterKey}   (account "starter", balance ${formatAmount(STARTER_BALANCE_NANO)})`,
      );
      out.write("");
      out.write("Try it:");
      out.write(
        // Any model id pastes as it is: the body is JSON, quoted for the shell.
        `  curl ${server.baseUrl}/chat/completions -H "Authorization: Bearer ${starterKey}" -H "Content-Type: application/json" -d ${quoteForShell(JSON.stringify({ model, messages: [{ role: "user", content: "Hello!" }] }))}`,
      );
    }
    out.write("");
  }
  out.write(`Tollgate listening on ${server.baseUrl}`);
  for (const replaced of config.replacedByEnvironment ?? []) {
    server.app.log.warn({ config: config.source }, `${replaced} in the config file (the environment wins)`);
  }
  for (const unset of config.unsetKeys ?? []) {
    server.app.log.warn({ config: config.source }, unset);
  }
  reload = createReloader({
    server,
    running: config,
    configFile,
    fixed: { hostFromCommandLine: host !== undefined, portFromCommandLine: port !== undefined },
  });
  crash.serving(server.app.log, () => server.close());
  const { exitAfterLog } = await import("./process/exit-after-log.ts");
  let closing = false;
  shutdown = (signal: string) => {
    // After a crash, whose stop already runs, a signal is a second one.
    if (closing || crash.crashed) {
      // An operator who asks twice does not want to wait (Ctrl-C twice): out at once, as a crash
      // would end it. What already answered is charged; the requests still running are not, and
      // any reservation of theirs in the store is released at the next start.
      server.app.log.warn(
        { signal },
        "second stop signal: exiting now, without the running requests' charges",
      );
      exitAfterLog(server.app.log, 1);
      return;
    }
    closing = true;
    server.app.log.info({ signal }, "shutting down");
    // Each exit waits for the log's last lines, the drain's own ("shut down") included.
    server.shutdown().then(
      // A crash during the drain has its exit code, whichever exit comes first.
      () => exitAfterLog(server.app.log, crash.crashed ? 1 : 0),
      (error: unknown) => {
        server.app.log.error({ err: error }, "shutdown failed");
        exitAfterLog(server.app.log, 1);
      },
    );
  };
  if (signalWhileStarting !== undefined) shutdown(signalWhileStarting);
  else if (reloadWhenStarted) reload();
}

/** `--host`: an address or host name as it is; empty or padded text names no host to listen on. */
function readHostOption(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  if (text === "" || text.trim() !== text) {
    throw new CliError(
      `--host must be an address or host name such as 127.0.0.1 or 0.0.0.0 (got ${JSON.stringify(text)})`,
    );
  }
  return text;
}

/** `--port`: digits only, as the PORT variable takes it (no "", " 80", 0x50 or 8e3). */
function readPortOption(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const port = readWholeNumber(text, 65_535);
  if (port === undefined) {
    throw new CliError(`--port must be an integer from 0 to 65535 (got ${JSON.stringify(text)})`);
  }
  return port;
}

/**
 * What a SIGHUP runs once the server has started: re-reads the config and swaps in its catalogue
 * (a config with errors is reported and the running one kept), then warns about every setting
 * the reload does not apply. Reloads run one after another, so the last signal's config wins.
 *
 * A config file that names no models (empty, or without `models:`) stands for the built-in
 * catalogue at start, but a reload that finds one while the running catalogue is the file's own
 * keeps the running catalogue: such a file is almost always one being written in place (an
 * editor, `>` in a shell) when the signal came, and swapping in the built-in catalogue would
 * answer 404 for every configured model. The operator who wants the built-in catalogue back
 * restarts, or removes the file (no file at all is the built-in default, SPEC §11).
 */
function createReloader(options: {
  server: RunningServer;
  /** The config the server started with: what it still runs with, but for the catalogue. */
  running: Config;
  configFile: string | undefined;
  fixed: UnappliedConfigChangesOptions;
}): () => void {
  const { server } = options;
  let previous = Promise.resolve();
  /** Whether the catalogue running now is the built-in one. */
  let runningBuiltIn = options.running.builtInCatalog === true;
  const reloadOnce = async () => {
    try {
      const next = await loadConfig({ file: options.configFile });
      if (next.builtInCatalog === true && next.source !== undefined && !runningBuiltIn) {
        server.app.log.error(
          { config: next.source },
          "the config file names no models (empty, or being written?); keeping the running catalogue",
        );
        return;
      }
      await server.reload(next);
      runningBuiltIn = next.builtInCatalog === true;
      for (const setting of listUnappliedConfigChanges(options.running, next, options.fixed)) {
        server.app.log.warn({ setting }, `${setting} changed in the config; restart the server to apply it`);
      }
    } catch (error) {
      server.app.log.error({ err: error }, "reloading the config failed; keeping the running one");
    }
  };
  return () => {
    previous = previous.then(reloadOnce);
  };
}

async function models(argv: string[], configFile: string | undefined): Promise<void> {
  await dispatchSubcommand({
    group: "models",
    usage: MODELS_USAGE,
    argv,
    out,
    handlers: {
      list: async (rest) => {
        parseCommandArguments(rest, { options: {}, positionals: 0, usage: MODELS_USAGE.list });
        const config = await loadConfig({ file: configFile, purpose: "command" });
        for (const model of config.models) {
          // A download URL's user, password and query (signed URLs) are not repeated: see README.
          const engine =
            model.engine === undefined ? "-" : `${model.engine.type}:${redactUrlsInText(model.engine.model)}`;
          out.write(`${model.id}\t${model.kind}\t${engine}`);
        }
      },
      pull: async (rest) => {
        const config = await loadConfig({ file: configFile, purpose: "command" });
        const { runModelsPullCommand } = await import("./models/pull-command.ts");
        await runModelsPullCommand(config, [...rest], out);
      },
      "make-test": (rest) => makeTestModel(rest),
    },
  });
}

/** `models make-test FILE [--seed N] [--size tiny|small]`. */
async function makeTestModel(argv: readonly string[]): Promise<void> {
  const usage = MODELS_USAGE["make-test"];
  const { values, positionals } = parseCommandArguments(argv, {
    options: { seed: { type: "string" }, size: { type: "string" } },
    positionals: 1,
    usage,
  });
  const seedText = stringOption(values, "seed");
  // Any safe integer seeds the generator (it hashes the number's text); negative ones and
  // other spellings of a number (0x10, 1e3) are refused so that one seed has one spelling.
  const seed = seedText === undefined ? undefined : readWholeNumber(seedText, Number.MAX_SAFE_INTEGER);
  if (seedText !== undefined && seed === undefined) {
    throw new CliError(
      `--seed must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER} (got ${JSON.stringify(seedText)})`,
    );
  }
  const size = stringOption(values, "size") ?? "tiny";
  if (size !== "tiny" && size !== "small") throw new CliError(`--size must be tiny or small (got ${size})`);
  const path = positionals[0] ?? "";
  if (path.trim() === "")
    throw new CliError(`FILE must be a file path such as ./models/tiny.gguf\nUsage: ${usage}`);
  const found = await stat(path).catch(() => undefined);
  if (found?.isDirectory()) {
    throw new CliError(`${path} is a folder; give the file to write, such as ${join(path, "tiny.gguf")}`);
  }
  // The file is replaced: only a GGUF (a test model being made again) or an empty file may be,
  // never a file that may be the only copy of something else (a checkpoint, a config).
  // A FIFO or a device (size 0) is no file to replace: renamed over, /dev/null would be gone.
  if (found !== undefined && !found.isFile()) {
    throw new CliError(`${path} is not a regular file; give the file to write, such as ./models/tiny.gguf`);
  }
  if (found !== undefined && found.size > 0) await refuseToReplaceOtherThanGguf(path);
  const { writeTestModel } = await import("./gguf/write-test-model.ts");
  const info = await writeTestModel({ path, size, ...(seed === undefined ? {} : { seed }) }).catch(
    (error: unknown) => {
      // The file system's own message names the temporary file, not the one asked for.
      const code = error instanceof Error && "code" in error ? error.code : undefined;
      if (typeof code !== "string") throw error;
      throw new CliError(`cannot write ${path} (${code}); check that its folder can be created and written`, {
        cause: error,
      });
    },
  );
  out.write(`wrote ${info.path} (${info.parameters} parameters, ${info.bytes} bytes)`);
}

/** Throws unless the existing, non-empty file at `path` is a GGUF file, which make-test may replace. */
async function refuseToReplaceOtherThanGguf(path: string): Promise<void> {
  const { startsWithGgufMagic } = await import("./gguf/check-model-file.ts");
  let isGguf: boolean;
  try {
    isGguf = await startsWithGgufMagic(path);
  } catch (error) {
    const code = error instanceof Error && "code" in error ? error.code : undefined;
    // Gone since it was looked at: nothing to keep.
    if (code === "ENOENT") return;
    if (typeof code !== "string") throw error;
    throw new CliError(
      `cannot read ${path} (${code}) to check that it is a GGUF model; it was left as it is. Give a new file name, such as ./models/tiny.gguf`,
      { cause: error },
    );
  }
  if (!isGguf) {
    throw new CliError(
      `${path} exists and is not a GGUF file; make-test would replace it, so it was left as it is. Give a new file name, such as ./models/tiny.gguf, or delete the file first if you do not need it`,
    );
  }
}

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

async function withStore<T>(
  configFile: string | undefined,
  run: (store: Store, config: Config) => Promise<T>,
) {
  const config = await loadConfig({ file: configFile, purpose: "command" });
  const { openStore } = await import("./store/open-store.ts");
  // A database an older version made is left to `serve` to migrate (see StoreOptions.upgrade).
  const store = await openStore(config.database, { upgrade: false });
  try {
    return await run(store, config);
  } finally {
    await store.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const { file, rest } = extractConfigOption(argv);
  const [command, ...args] = rest;
  switch (command) {
    case "serve":
      return serve(args, file);
    // Each store command answers --help before the config is read or the store opened: help
    // must work where neither does yet, and must not create a database.
    case "accounts": {
      const { runAccountsCommand, writeAccountsHelp } = await import("./admin/accounts-command.ts");
      if (writeAccountsHelp(args, out)) return;
      return withStore(file, (store) => runAccountsCommand(store, args, out));
    }
    case "keys": {
      const { runKeysCommand, writeKeysHelp } = await import("./admin/keys-command.ts");
      if (writeKeysHelp(args, out)) return;
      return withStore(file, (store, config) => {
        const redis = config.redis;
        return runKeysCommand(store, args, out, {
          knownModels: config.models.map((model) => model.id),
          ...(redis === undefined
            ? {}
            : { afterKeyChanged: (publicId) => tellServersKeyChanged(redis, publicId) }),
        });
      });
    }
    case "usage": {
      const { runUsageCommand, writeUsageHelp } = await import("./admin/usage-command.ts");
      if (writeUsageHelp(args, out)) return;
      return withStore(file, (store) => runUsageCommand(store, args, out));
    }
    case "audit": {
      const { runAuditCommand, writeAuditHelp } = await import("./admin/audit-command.ts");
      if (writeAuditHelp(args, out)) return;
      const result = await withStore(file, (store) => runAuditCommand(store, args, out));
      if (!result.ok) process.exitCode = 1;
      return;
    }
    case "models":
      return models(args, file);
    case "help":
    case "--help":
    case "-h": {
      // `tollgate help keys create` is `tollgate keys create --help`.
      const [topic, ...more] = args;
      if (topic !== undefined && COMMANDS_WITH_HELP.has(topic)) return main([topic, ...more, "--help"]);
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
  process.exitCode = 1;
});
