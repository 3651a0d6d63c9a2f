/**
 * Loads the configuration the service (and every CLI command) runs with (SPEC §2, §3, §11).
 *
 * Which file: `options.file` (`--config`), else `TOLLGATE_CONFIG`, else `./tollgate.yaml` in the
 * working folder if it exists, else the built-in default (no file: defaults and the built-in
 * catalogue). A file named explicitly must exist. Then `HOST`, `PORT`, `TOLLGATE_DATABASE_URL`,
 * `TOLLGATE_REDIS_URL` and `TOLLGATE_ADMIN_KEY` replace the file's values, and `${VAR}` in
 * string values is read from the environment.
 *
 * `created` of models that do not set it: the file's modification time in Unix seconds (stable
 * between reloads of an unchanged file); for the built-in catalogue a constant.
 *
 * Any problem throws one {@link ConfigError} listing every problem with its field and line.
 * Safe to call again on SIGHUP: it reads everything afresh and changes nothing.
 *
 * The file must be a regular file, or a pipe a process holds open (`--config <(command)`, which
 * a reload then reads as empty): a named pipe (mkfifo), a device or a socket is refused before it
 * is opened, since opening or reading one may wait for ever (for a writer that never comes) and
 * a reload that never ends would hold back every later one. Reading takes at most
 * {@link CONFIG_READ_TIME_LIMIT_MS} (a hung network mount, a pipe whose writer never closes it).
 */
import { constants } from "node:fs";
import { open, readFile, readlink, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { LineCounter, parseDocument } from "yaml";
import { DEFAULT_CONFIG_FILE_NAME } from "./config-defaults.ts";
import { ConfigError, type ConfigProblem } from "./config-error.ts";
import type { ConfigIssue } from "./config-fields.ts";
import { decodeConfigText } from "./decode-config-text.ts";
import { DEFAULT_CATALOG_CREATED } from "./default-catalog.ts";
import { describeYamlErrors, describeYamlMessage } from "./describe-yaml-errors.ts";
import { type ConfigPurpose, type LoadedConfig, readConfig } from "./read-config.ts";

export type { LoadedConfig } from "./read-config.ts";

export interface LoadConfigOptions {
  /** `--config FILE`, relative to `cwd`. */
  file?: string;
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Working folder; default `process.cwd()`. */
  cwd?: string;
  /** Who reads it (see `ConfigPurpose` in read-config.ts); default `"serve"`. */
  purpose?: ConfigPurpose;
  /** How long reading the file may take; default {@link CONFIG_READ_TIME_LIMIT_MS}. */
  readTimeLimitMs?: number;
}

/**
 * How long reading the config file may take before the load fails: long enough for any file
 * worth reading, short enough that a reload stuck on a hung mount lets the next SIGHUP be served.
 */
export const CONFIG_READ_TIME_LIMIT_MS = 10_000;
/** How often a pipe whose writer has not finished is read again. */
const PIPE_POLL_MS = 20;
/**
 * The largest config file read: thousands of models take a few MB. A 600 MB file was read whole,
 * then refused as "not UTF-8" (the text was past V8's longest string).
 */
const MAX_CONFIG_BYTES = 64 * 1024 * 1024;
const TOO_LARGE = `is larger than ${MAX_CONFIG_BYTES / 1024 / 1024} MiB, more than any catalogue needs; name the config file, not a data file`;

/** Where the configuration comes from. */
export type ConfigLocation =
  | { kind: "file"; path: string; namedBy: "--config" | "TOLLGATE_CONFIG" | "working folder" }
  | { kind: "built-in" };

const MAX_ALIAS_COUNT = 100;

export async function loadConfig(options: LoadConfigOptions = {}): Promise<LoadedConfig> {
  const env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? process.cwd());
  const location = await locateConfig({ file: options.file, env, cwd });
  if (location.kind === "built-in") {
    const result = readConfig({
      raw: {},
      env,
      cwd,
      configFolder: cwd,
      source: undefined,
      created: DEFAULT_CATALOG_CREATED,
      purpose: options.purpose ?? "serve",
    });
    if (result.ok) return result.config;
    throw new ConfigError({ problems: result.issues.list.map(placeWithoutLine), source: undefined });
  }

  const source = location.path;
  const { text, modifiedSeconds, pipe } = await readConfigFile(
    location,
    options.readTimeLimitMs ?? CONFIG_READ_TIME_LIMIT_MS,
  );
  // The YAML parser is imported only when there is a file to parse (the built-in default needs none).
  const yaml = await import("yaml");
  const lineCounter = new yaml.LineCounter();
  const document = yaml.parseDocument(text, {
    lineCounter,
    prettyErrors: false,
    merge: true,
    uniqueKeys: true,
  });
  const yamlErrors = [...document.errors, ...document.warnings];
  if (yamlErrors.length > 0) {
    throw new ConfigError({
      problems: describeYamlErrors(yamlErrors, text, lineCounter),
      source,
    });
  }
  const cyclic = findAliasInsideItsValue(yaml, document);
  if (cyclic !== undefined) {
    // The alias's name is not quoted: a value written unquoted after `*` reads as one.
    throw new ConfigError({
      problems: [
        {
          field: "",
          message:
            "YAML error: an alias (*name) stands inside the value its anchor (&name) names, so that value would contain itself without end; write the value out where the alias is",
          line: lineCounter.linePos(cyclic).line,
          column: undefined,
        },
      ],
      source,
    });
  }
  let raw: unknown;
  try {
    raw = document.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) ?? {};
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ConfigError({ problems: [fileProblem(`YAML error: ${describeYamlMessage(message)}`)], source });
  }

  const result = readConfig({
    raw,
    env,
    cwd,
    // A pipe (`--config <(command)`, /dev/fd/63) has no folder of its own: /dev/fd is none to
    // write a database in, and a recursive mkdir there never returned.
    configFolder: pipe ? cwd : dirname(source),
    source,
    created: modifiedSeconds,
    purpose: options.purpose ?? "serve",
  });
  if (result.ok) return result.config;
  // In the order of the file; problems without a line (environment variables) come last.
  const problems = result.issues.list
    .map((issue) => placeAtLine(issue, document, lineCounter))
    .sort(compareByLine);
  throw new ConfigError({ problems, source });
}

/**
 * Which configuration `loadConfig` reads: `--config`, else `TOLLGATE_CONFIG`, else
 * `./tollgate.yaml` if it exists now (anything but a folder: a named pipe there is refused, not
 * taken for no file), else the built-in default. Does not check that a named file exists
 * (reading it does).
 */
export async function locateConfig(options: {
  file: string | undefined;
  env: NodeJS.ProcessEnv;
  cwd: string;
}): Promise<ConfigLocation> {
  if (options.file !== undefined && options.file !== "") {
    return { kind: "file", path: resolve(options.cwd, options.file), namedBy: "--config" };
  }
  const fromEnvironment = options.env.TOLLGATE_CONFIG;
  if (fromEnvironment !== undefined && fromEnvironment !== "") {
    return { kind: "file", path: resolve(options.cwd, fromEnvironment), namedBy: "TOLLGATE_CONFIG" };
  }
  const inWorkingFolder = resolve(options.cwd, DEFAULT_CONFIG_FILE_NAME);
  const found = await stat(inWorkingFolder).then(
    (stats) => !stats.isDirectory(),
    () => false,
  );
  return found ? { kind: "file", path: inWorkingFolder, namedBy: "working folder" } : { kind: "built-in" };
}

/** Reads the file `location` names, within `timeLimitMs`; every problem is a {@link ConfigError}. */
async function readConfigFile(
  location: Extract<ConfigLocation, { kind: "file" }>,
  timeLimitMs: number,
): Promise<ConfigFileText> {
  const problem = (message: string) =>
    new ConfigError({ problems: [fileProblem(message)], source: location.path });
  const fail = (message: string): never => {
    throw problem(message);
  };
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      stop.abort();
      reject(
        problem(
          `could not be read within ${timeLimitMs / 1000} s (named by ${location.namedBy}): a hung network mount, or a pipe whose writer has not closed it? Name a local YAML file`,
        ),
      );
    }, timeLimitMs);
  });
  try {
    // A read stuck in the kernel (a hung mount) cannot be stopped; the load fails without it.
    return await Promise.race([readWithin(location, stop.signal, fail), timedOut]);
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
}

/** A config file's text, when it changed last, and whether it came from a pipe a process holds open. */
interface ConfigFileText {
  text: string;
  modifiedSeconds: number;
  pipe: boolean;
}

async function readWithin(
  location: Extract<ConfigLocation, { kind: "file" }>,
  signal: AbortSignal,
  fail: (message: string) => never,
): Promise<ConfigFileText> {
  try {
    const stats = await stat(location.path);
    const modifiedSeconds = Math.floor(stats.mtimeMs / 1000);
    if (stats.isDirectory()) {
      return fail(
        `is a folder (named by ${location.namedBy}); name a YAML file such as ${DEFAULT_CONFIG_FILE_NAME}`,
      );
    }
    if (stats.isFIFO()) {
      if (await isOpenPipe(location.path)) {
        const bytes = await readPipe(location.path, signal);
        return {
          text: decodeOrFail(bytes ?? fail(TOO_LARGE), fail),
          modifiedSeconds,
          pipe: true,
        };
      }
      return fail(
        `is a named pipe (FIFO), not a file (named by ${location.namedBy}): opening it waits for a writer, at start and on every reload; write the config to a file and name that`,
      );
    }
    if (!stats.isFile()) {
      const kind = stats.isSocket()
        ? "a socket"
        : stats.isCharacterDevice()
          ? "a character device"
          : "a block device";
      return fail(
        `is ${kind}, not a file (named by ${location.namedBy}); name a YAML file such as ${DEFAULT_CONFIG_FILE_NAME}`,
      );
    }
    if (stats.size > MAX_CONFIG_BYTES) return fail(TOO_LARGE);
    const bytes = await readFile(location.path, { signal });
    return { text: decodeOrFail(bytes, fail), modifiedSeconds, pipe: false };
  } catch (error) {
    if (error instanceof ConfigError || signal.aborted) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      return fail(
        `does not exist (named by ${location.namedBy}); check the path, or leave it out to use ./${DEFAULT_CONFIG_FILE_NAME} or the built-in catalogue`,
      );
    }
    if (code === "EACCES") return fail("cannot be read: permission denied; let the service's user read it");
    return fail(`cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The file's text; a file that is not UTF-8 fails (see decode-config-text.ts). */
function decodeOrFail(bytes: Uint8Array, fail: (message: string) => never): string {
  const decoded = decodeConfigText(bytes);
  return decoded.ok ? decoded.text : fail(decoded.problem);
}

/**
 * Whether `path` reaches a pipe some process holds open (`/dev/fd/63` of `--config <(command)`,
 * `/dev/stdin`, `/proc/PID/fd/N`) rather than a named pipe made by mkfifo: the kernel shows the
 * former as a link to `pipe:[inode]`, which is no path. Opening it never waits for a writer.
 */
async function isOpenPipe(path: string): Promise<boolean> {
  let current = path;
  for (let hop = 0; hop < 40; hop++) {
    let target: string;
    try {
      target = await readlink(current);
    } catch {
      return false;
    }
    if (/^pipe:\[\d+\]$/.test(target)) return true;
    current = resolve(dirname(current), target);
  }
  return false;
}

/**
 * Reads a pipe's bytes to its end without blocking (a read blocked in the thread pool could not be
 * stopped, and would keep the process from exiting): what a writer still writing has not sent
 * yet is read again every {@link PIPE_POLL_MS} until it closes its end or `signal` stops it.
 */
async function readPipe(path: string, signal: AbortSignal): Promise<Buffer | undefined> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    const buffer = Buffer.alloc(64 * 1024);
    for (;;) {
      signal.throwIfAborted();
      let bytesRead: number;
      try {
        ({ bytesRead } = await handle.read(buffer, 0, buffer.length, null));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
        await sleep(PIPE_POLL_MS, undefined, { signal });
        continue;
      }
      if (bytesRead === 0) return Buffer.concat(chunks);
      total += bytesRead;
      if (total > MAX_CONFIG_BYTES) return undefined;
      chunks.push(Buffer.from(buffer.subarray(0, bytesRead)));
    }
  } finally {
    await handle.close();
  }
}

function compareByLine(left: ConfigProblem, right: ConfigProblem): number {
  if (left.line === right.line) return 0;
  if (left.line === undefined) return 1;
  if (right.line === undefined) return -1;
  return left.line - right.line;
}

/**
 * Where an alias stands inside the very node its anchor names (`x: &a [*a]`), as an offset in
 * the text; `undefined` when none does. Regression: such a value became a JavaScript object that
 * contains itself, and reading it ran the stack out ("Maximum call stack size exceeded", with no
 * line; a reload logged a RangeError).
 */
function findAliasInsideItsValue(
  yaml: typeof import("yaml"),
  document: ReturnType<typeof parseDocument>,
): number | undefined {
  let offset: number | undefined;
  yaml.visit(document, {
    Alias(_key, alias, path) {
      const target = alias.resolve(document);
      if (target === undefined || !path.includes(target)) return undefined;
      offset = alias.range?.[0] ?? 0;
      return yaml.visit.BREAK;
    },
  });
  return offset;
}

function fileProblem(message: string): ConfigProblem {
  return { field: "", message, line: undefined, column: undefined };
}

function placeWithoutLine(issue: ConfigIssue): ConfigProblem {
  return { field: issue.field, message: issue.message, line: undefined, column: undefined };
}

/** The line of the field, or of the nearest enclosing field written in the file. */
function placeAtLine(
  issue: ConfigIssue,
  document: ReturnType<typeof parseDocument>,
  lineCounter: LineCounter,
): ConfigProblem {
  const path = issue.path;
  if (path !== undefined) {
    for (let length = path.length; length > 0; length--) {
      const node: unknown = document.getIn(path.slice(0, length), true);
      const offset = rangeStart(node);
      if (offset !== undefined) {
        return { ...placeWithoutLine(issue), line: lineCounter.linePos(offset).line };
      }
    }
  }
  return placeWithoutLine(issue);
}

function rangeStart(node: unknown): number | undefined {
  if (typeof node !== "object" || node === null || !("range" in node)) return undefined;
  const range: unknown = node.range;
  return Array.isArray(range) && typeof range[0] === "number" ? range[0] : undefined;
}
