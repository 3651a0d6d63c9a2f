import { setTimeout as delay } from "node:timers/promises";
import { CliError, type OutputSink } from "./admin/cli-error.ts";
import {
  listUnappliedConfigChanges,
  type UnappliedConfigChangesOptions,
} from "./admin/list-unapplied-config-changes.ts";
import { nameAdminKeySource } from "./admin/name-admin-key-source.ts";
import {
  isHelpRequested,
  parseCommandArguments,
  readWholeNumber,
  stringOption,
} from "./admin/parse-command-arguments.ts";
import { quoteForShell } from "./admin/quote-for-shell.ts";
import { formatAmount } from "./billing/money.ts";
import type { Config } from "./catalog/catalog.ts";
import { loadConfig } from "./catalog/load-config.ts";
import type { RunningServer } from "./server.ts";

// The HTTP server and the process handlers are imported when the command runs: the CLI loads
// this module for `serve` only, and `--help` or an option refused here loads none of them.

const SERVE_USAGE = "tollgate serve [--config FILE] [--host H] [--port N]";

/** Where bin/tollgate.js notes a SIGHUP that came before this code was loaded. */
const EARLY_SIGHUP = Symbol.for("tollgate.early-sighup");
interface EarlySighup {
  signalled: boolean;
  listener: () => void;
}

/**
 * `tollgate serve`: starts the API server with the config `configFile` names (else the default
 * one) and prints the keys a first start created; SIGHUP reloads the config, SIGTERM or SIGINT
 * shuts the server down.
 */
export async function runServeCommand(
  argv: readonly string[],
  configFile: string | undefined,
  out: OutputSink,
): Promise<void> {
  if (isHelpRequested(argv, SERVE_USAGE)) {
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
  // One that came before this code was loaded, which bin/tollgate.js noted.
  const early = (globalThis as Record<symbol, EarlySighup | undefined>)[EARLY_SIGHUP];
  if (early !== undefined) {
    process.off("SIGHUP", early.listener);
    if (early.signalled) reloadWhenStarted = true;
  }
  // SIGTERM and SIGINT likewise: one that comes while the server starts (its store claimed, its
  // port not yet open) would end the process at once with 143; it shuts down once started. A
  // start that waits for another process's migration of a PostgreSQL store (which may take
  // minutes, or for ever behind a stuck session) stops waiting and fails instead.
  let shutdown: ((signal: string) => void) | undefined;
  let signalWhileStarting: string | undefined;
  const starting = new AbortController();
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (shutdown !== undefined) {
        shutdown(signal);
        return;
      }
      signalWhileStarting ??= signal;
      starting.abort(new Error(`${signal} while starting`));
    });
  }
  const env = withCommandLineAddress(host, port);
  const config = await loadConfig({ file: configFile, env });
  const { STARTER_BALANCE_NANO, startServer } = await import("./server.ts");
  let server: RunningServer;
  try {
    server = await startServer({
      config,
      signal: starting.signal,
      releaseStartupMemory: true,
      onLogger: (logger) => crash.logging(logger),
      ...(host === undefined ? {} : { host }),
      ...(port === undefined ? {} : { port }),
    });
  } catch (error) {
    // Stopped as it was asked to (SPEC §11: exit code 0 after SIGTERM or SIGINT unless the
    // shutdown failed), though it had not started: said, and nothing is left open.
    if (causedBy(error, starting.signal.reason)) {
      process.stderr.write(`tollgate: ${error instanceof Error ? error.message : String(error)}\n`);
      return;
    }
    throw error;
  }
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
    // A start makes an admin key while one is configured only when that one is a stored key that
    // was revoked or has expired, or a user's key (admin/bootstrap.ts): it never works as one, and
    // the operator who holds only it must learn which setting to change.
    if (adminKey !== undefined && config.adminKey !== undefined) {
      const userKey = server.createdKeys.refusedAdminKey?.reason === "user";
      out.write(`  ${describeRefusedConfiguredKey(nameAdminKeySource(config.source), userKey)}`);
    }
    if (starterKey !== undefined) {
      out.write(
        `  starter key: ${starterKey}   (account "starter", balance ${formatAmount(STARTER_BALANCE_NANO)})`,
      );
      out.write("");
      out.write("Try it:");
      out.write(
        // Any model id pastes as it is: the body is JSON, quoted for the shell.
        `  curl ${reachableUrl(server.baseUrl)}/chat/completions -H "Authorization: Bearer ${starterKey}" -H "Content-Type: application/json" -d ${quoteForShell(JSON.stringify({ model, messages: [{ role: "user", content: "Hello!" }] }))}`,
      );
    }
    out.write("");
  }
  // Signals go to this process, not to npm's (`npm start`), which exits on them and leaves the
  // server running without the reload: the banner names it.
  out.write(`Tollgate listening on ${server.baseUrl} (pid ${process.pid}; reload: kill -HUP ${process.pid})`);
  // `--host` and `--port` win over the variables and the file alike: HOST or PORT replaced nothing
  // then (it was said to, beside a server listening where --port said).
  const given = { HOST: host !== undefined, PORT: port !== undefined };
  for (const replaced of config.replacedByEnvironment ?? []) {
    const variable = replaced.slice(0, replaced.indexOf(" "));
    if (Object.hasOwn(given, variable) && given[variable as keyof typeof given]) continue;
    server.app.log.warn({ config: config.source }, `${replaced} in the config file (the environment wins)`);
  }
  for (const unset of config.unsetKeys ?? []) {
    server.app.log.warn({ config: config.source }, unset);
  }
  // A file without models (its models commented out, or `models:` left empty) serves the
  // built-in catalogue, whose model is downloaded: never silently.
  if (config.builtInCatalog === true && config.source !== undefined) {
    server.app.log.warn(
      { config: config.source },
      "the config file names no models: serving the built-in catalogue (its model is downloaded at start); write models: [] to serve none",
    );
  }
  // Kept working (a demo, a test), but never silently: the ledger goes with the process.
  const { isMemoryDatabase } = await import("./admin/refuse-memory-database.ts");
  if (isMemoryDatabase(config.database)) {
    server.app.log.warn(
      { config: config.source },
      "the database is in memory (sqlite::memory:): accounts, keys, balances and usage live in this process only and are lost when it exits, and no CLI command can reach them; point the database setting at a file, such as sqlite:./data/tollgate.db, to keep them",
    );
  }
  reload = createReloader({
    server,
    running: config,
    configFile,
    env,
    fixed: { hostFromCommandLine: host !== undefined, portFromCommandLine: port !== undefined },
  });
  crash.serving(server.app.log, () => server.close());
  const { exitAfterLog } = await import("./process/exit-after-log.ts");
  const { ChargesNotRecordedError } = await import("./server-drain.ts");
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
        server.app.log.error(
          error instanceof ChargesNotRecordedError ? { reason: error.message } : { err: error },
          "shutdown failed",
        );
        exitAfterLog(server.app.log, 1);
      },
    );
  };
  if (signalWhileStarting !== undefined) shutdown(signalWhileStarting);
  else if (reloadWhenStarted) reload();
}

/** What a start that made an admin key although one is configured says of the configured one. */
function describeRefusedConfiguredKey(source: string, userKey: boolean): string {
  return `${source} names ${userKey ? "a user's key, not an admin key" : "an admin key that was revoked or has expired"}: the admin API refuses it. Put the new admin key there, or remove it.`;
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
 * The environment the config is read with: `--host` and `--port` as HOST and PORT, which win over
 * the file's host and port, so that the file's are not read at all (a `port: "${PORT}"` with no
 * PORT set stopped `serve --port 8080`).
 */
function withCommandLineAddress(host: string | undefined, port: number | undefined): NodeJS.ProcessEnv {
  if (host === undefined && port === undefined) return process.env;
  return {
    ...process.env,
    ...(host === undefined ? {} : { HOST: host }),
    ...(port === undefined ? {} : { PORT: String(port) }),
  };
}

/**
 * `baseUrl` as a client on this machine reaches it: a server listening on every address
 * (`0.0.0.0`, as in the image, or `::`) is reached at the loopback one (some systems refuse to
 * connect to 0.0.0.0).
 */
export function reachableUrl(baseUrl: string): string {
  return baseUrl.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:");
}

/**
 * What a SIGHUP runs once the server has started: re-reads the config and swaps in its catalogue
 * (a config with errors is reported and the running one kept), then warns about every setting
 * the reload does not apply. Reloads run one after another, so the last signal's config wins;
 * each is logged as it begins, and one that comes while another runs says it waits for it (the
 * read of the file takes at most `CONFIG_READ_TIME_LIMIT_MS`, so a stuck one holds back no other
 * for ever).
 *
 * A config file that names no models (empty, or without `models:`) stands for the built-in
 * catalogue at start, but a reload that finds one while the running catalogue is the file's own
 * keeps the running catalogue: such a file is almost always one being written in place (an
 * editor, `>` in a shell) when the signal came, and swapping in the built-in catalogue would
 * answer 404 for every configured model. The operator who wants the built-in catalogue back
 * restarts, or removes the file (no file at all is the built-in default, SPEC §11). A reload
 * that finds the working folder's `tollgate.yaml` gone looks again for a second first (an editor
 * saving by renaming has the new file in place by then), and says so at warning level when it
 * swaps in the built-in catalogue (it used to do so at once, logged as any reload: the configured
 * models answered 404 and the built-in model's download began).
 */
function createReloader(options: {
  server: RunningServer;
  /** The config the server started with: what it still runs with, but for the catalogue. */
  running: Config;
  configFile: string | undefined;
  /** The environment the config is read with (withCommandLineAddress). */
  env: NodeJS.ProcessEnv;
  fixed: UnappliedConfigChangesOptions;
}): () => void {
  const { server } = options;
  let previous = Promise.resolve();
  /** Reloads asked for and not ended yet, the running one included. */
  let pending = 0;
  /** Whether the catalogue running now is the built-in one. */
  let runningBuiltIn = options.running.builtInCatalog === true;
  const reloadOnce = async () => {
    server.app.log.info("SIGHUP: reloading the config");
    try {
      let next = await loadConfig({ file: options.configFile, env: options.env });
      // The working folder's file is gone: saved by renaming (vim moves the file aside, then
      // writes the new one), or removed. Looked for again for a moment before the built-in
      // catalogue, which SPEC §11 serves when there is no file, replaces the configured one.
      for (let look = 0; isGone(next) && !runningBuiltIn && look < GONE_FILE_LOOKS; look++) {
        await delay(GONE_FILE_LOOK_MS);
        next = await loadConfig({ file: options.configFile, env: options.env });
      }
      if (isGone(next) && !runningBuiltIn) {
        server.app.log.warn(
          "./tollgate.yaml is gone from the working folder: serving the built-in catalogue (put the file back and send SIGHUP to serve its models again)",
        );
      }
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
      // The config's own advice ("set it") cannot work on a running server.
      const unsetVariable = error instanceof Error && / is not set; set it/.test(error.message);
      server.app.log.error(
        { err: error },
        unsetVariable
          ? "reloading the config failed; keeping the running one (a server reads its environment once, at start: a variable set since takes a restart)"
          : "reloading the config failed; keeping the running one",
      );
    }
  };
  return () => {
    if (pending > 0) {
      server.app.log.info("SIGHUP while a reload runs: reloading again once it has ended");
    }
    pending++;
    previous = previous.then(reloadOnce).finally(() => {
      pending--;
    });
  };
}

/**
 * How often, and how long apart, a reload looks again for a working-folder config file that is
 * gone: an editor that saves by renaming has the new file in place within milliseconds.
 */
const GONE_FILE_LOOKS = 5;
const GONE_FILE_LOOK_MS = 200;

/** Whether `config` is the built-in catalogue because no config file was found. */
function isGone(config: Config): boolean {
  return config.builtInCatalog === true && config.source === undefined;
}

/** Whether `reason` is `error` or one of its causes. */
function causedBy(error: unknown, reason: unknown): boolean {
  for (
    let cause = error;
    cause !== undefined && cause !== null;
    cause = (cause as { cause?: unknown }).cause
  ) {
    if (cause === reason) return true;
  }
  return false;
}
