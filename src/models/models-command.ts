import { stat } from "node:fs/promises";
import { constants } from "node:os";
import { join } from "node:path";
import { CliError, type OutputSink } from "../admin/cli-error.ts";
import { dispatchSubcommand } from "../admin/dispatch-subcommand.ts";
import { parseCommandArguments, readWholeNumber, stringOption } from "../admin/parse-command-arguments.ts";
import { loadConfig } from "../catalog/load-config.ts";
import { redactUrlsInText } from "./download/redact-url.ts";

// The downloader and the test-model writer are imported when their subcommand runs: `models list`
// loads neither.

const MODELS_USAGE = {
  list: "tollgate models list",
  pull: "tollgate models pull ID|URI",
  "make-test": "tollgate models make-test FILE [--seed N] [--size tiny|small]",
} as const;

/** `tollgate models list|pull|make-test`: the catalogue, and model files on this machine. */
export async function runModelsCommand(
  argv: readonly string[],
  configFile: string | undefined,
  out: OutputSink,
): Promise<void> {
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
        const { runModelsPullCommand } = await import("./pull-command.ts");
        await runInterruptibly((signal) => runModelsPullCommand(config, [...rest], out, { signal }));
      },
      "make-test": (rest) => makeTestModel(rest, out),
    },
  });
}

/** A second signal this soon after the first is the same request to stop (see runInterruptibly). */
const REPEATED_SIGNAL_MS = 1000;

/**
 * Runs `work` with a signal that SIGINT, SIGTERM and SIGHUP abort: a pull stopped by Ctrl-C (or a
 * container's stop, or a dropped SSH session's hangup) winds its download down, its lock file
 * released and its partial file kept for the next run to resume, then exits 130, 143 or 129. It
 * used to die at once and leave its lock file, which a replica of another machine sharing the
 * models folder waited out (30 s). A second
 * signal exits at once, unless it comes within a second of the first (Ctrl-C pressed twice out
 * of habit, while the wind-down takes milliseconds): it would leave the lock file behind.
 */
async function runInterruptibly(work: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const controller = new AbortController();
  let received: NodeJS.Signals | undefined;
  let receivedAt = 0;
  // As a shell reports a process a signal ended: 128 and the signal's number.
  const exitCodeOf = (name: NodeJS.Signals) => 128 + constants.signals[name];
  const onSignal = (name: NodeJS.Signals) => {
    if (received !== undefined) {
      if (performance.now() - receivedAt >= REPEATED_SIGNAL_MS) process.exit(exitCodeOf(name));
      return;
    }
    received = name;
    receivedAt = performance.now();
    controller.abort(new Error(name));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", onSignal);
  try {
    await work(controller.signal);
  } catch (error) {
    if (received === undefined) throw error;
    throw new CliError(
      `Stopped by ${received}: what was downloaded so far, if anything, is kept; run the command again to resume.`,
      { exitCode: exitCodeOf(received), cause: error },
    );
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("SIGHUP", onSignal);
  }
}

/** `models make-test FILE [--seed N] [--size tiny|small]`. */
async function makeTestModel(argv: readonly string[], out: OutputSink): Promise<void> {
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
  const { writeTestModel } = await import("../gguf/write-test-model.ts");
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
  const { startsWithGgufMagic } = await import("../gguf/check-model-file.ts");
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
