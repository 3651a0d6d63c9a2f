#!/usr/bin/env node
import { parseArgs } from "node:util";
import { CliError } from "./admin/cli-error.ts";
import { formatAmount } from "./billing/money.ts";
import type { Config } from "./catalog/catalog.ts";
import { loadConfig } from "./catalog/load-config.ts";
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
  usage [--account NAME|ID] [--key PUBLICID] [--model M] [--since ISO] [--until ISO]
        [--group-by day|model|key] [--format table|json|csv]
                                                    the usage ledger
  audit                                             check balances against credits and charges;
                                                    exit 1 with a report where they disagree
  models list                                       list the catalogue
  models pull ID|URI                                download a model into the models folder (resumable)
  models make-test FILE [--seed N] [--size tiny|small]
                                                    write a tiny random-weight GGUF for tests and demos

Every command accepts --config FILE (else TOLLGATE_CONFIG, else ./tollgate.yaml, else the built-in catalogue).`;

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
 * dropped, quietly, and the command still runs to its end and its exit code (audit's included).
 */
let outputClosed = false;
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE" && error.code !== "ERR_STREAM_DESTROYED") throw error;
  outputClosed = true;
});
const out = {
  write: (line: string) => {
    if (!outputClosed) process.stdout.write(`${line}\n`);
  },
};

async function serve(argv: string[], configFile: string | undefined): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { host: { type: "string" }, port: { type: "string" } },
  });
  const config = await loadConfig({ file: configFile });
  const { STARTER_BALANCE_NANO, startServer } = await import("./server.ts");
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    throw new CliError(`--port must be a port number from 0 to 65535 (got ${values.port})`);
  }
  const server = await startServer({
    config,
    ...(values.host === undefined ? {} : { host: values.host }),
    ...(port === undefined ? {} : { port }),
  });
  const { adminKey, starterKey } = server.createdKeys;
  if (starterKey !== undefined || adminKey !== undefined) {
    const model = config.models.find((entry) => entry.kind === "chat")?.id ?? "MODEL";
    out.write("");
    out.write("First start: created these keys. They are shown once; keep them safe.");
    if (adminKey !== undefined) out.write(`  admin key:   ${adminKey}`);
    if (starterKey !== undefined) {
      out.write(
        `  starter key: ${starterKey}   (account "starter", balance ${formatAmount(STARTER_BALANCE_NANO)})`,
      );
      out.write("");
      out.write("Try it:");
      out.write(
        `  curl ${server.baseUrl}/chat/completions -H "Authorization: Bearer ${starterKey}" -H "Content-Type: application/json" -d '{"model":"${model}","messages":[{"role":"user","content":"Hello!"}]}'`,
      );
    }
    out.write("");
  }
  out.write(`Tollgate listening on ${server.baseUrl}`);
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    server.app.log.info({ signal }, "shutting down");
    server.shutdown().then(
      () => process.exit(0),
      (error: unknown) => {
        server.app.log.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  // SIGHUP re-reads the config this command would read at start (SPEC §11) and swaps in its
  // catalogue and prices; a config with errors is reported and the running one kept.
  process.on("SIGHUP", () => {
    loadConfig({ file: configFile })
      .then((next) => server.reload(next))
      .catch((error: unknown) =>
        server.app.log.error({ err: error }, "reloading the config failed; keeping the running one"),
      );
  });
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}

async function models(argv: string[], configFile: string | undefined): Promise<void> {
  const [subcommand, ...rest] = argv;
  switch (subcommand) {
    case "list": {
      const config = await loadConfig({ file: configFile });
      for (const model of config.models) {
        const engine = model.engine === undefined ? "-" : `${model.engine.type}:${model.engine.model}`;
        out.write(`${model.id}\t${model.kind}\t${engine}`);
      }
      return;
    }
    case "pull": {
      const config = await loadConfig({ file: configFile });
      const { runModelsPullCommand } = await import("./models/pull-command.ts");
      return runModelsPullCommand(config, rest, out);
    }
    case "make-test": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { seed: { type: "string" }, size: { type: "string" } },
      });
      const file = positionals[0];
      if (file === undefined || positionals.length > 1)
        throw new CliError("usage: tollgate models make-test FILE [--seed N] [--size tiny|small]");
      const seed = values.seed === undefined ? undefined : Number(values.seed);
      if (seed !== undefined && !Number.isSafeInteger(seed))
        throw new CliError(`--seed must be an integer (got ${values.seed})`);
      const size = values.size ?? "tiny";
      if (size !== "tiny" && size !== "small")
        throw new CliError(`--size must be tiny or small (got ${size})`);
      const { writeTestModel } = await import("./gguf/write-test-model.ts");
      const info = await writeTestModel({ path: file, size, ...(seed === undefined ? {} : { seed }) });
      out.write(`wrote ${info.path} (${info.parameters} parameters, ${info.bytes} bytes)`);
      return;
    }
    default:
      throw new CliError(
        `unknown models command '${subcommand ?? ""}'; try 'models list', 'models pull ID|URI' or 'models make-test FILE'`,
      );
  }
}

async function withStore<T>(
  configFile: string | undefined,
  run: (store: Store, config: Config) => Promise<T>,
) {
  const config = await loadConfig({ file: configFile });
  const { openStore } = await import("./store/open-store.ts");
  const store = await openStore(config.database);
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
    case "accounts": {
      const { runAccountsCommand } = await import("./admin/accounts-command.ts");
      return withStore(file, (store) => runAccountsCommand(store, args, out));
    }
    case "keys": {
      const { runKeysCommand } = await import("./admin/keys-command.ts");
      return withStore(file, (store, config) =>
        runKeysCommand(store, args, out, { knownModels: config.models.map((model) => model.id) }),
      );
    }
    case "usage": {
      const { runUsageCommand } = await import("./admin/usage-command.ts");
      return withStore(file, (store) => runUsageCommand(store, args, out));
    }
    case "audit": {
      const { runAuditCommand } = await import("./admin/audit-command.ts");
      const result = await withStore(file, (store) => runAuditCommand(store, args, out));
      if (!result.ok) process.exitCode = 1;
      return;
    }
    case "models":
      return models(args, file);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      out.write(USAGE);
      return;
    default:
      throw new CliError(`unknown command '${command}'\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`tollgate: ${message}\n`);
  process.exitCode = 1;
});
