import { stat } from "node:fs/promises";
import { parseArgs } from "node:util";
import { CliError, type OutputSink } from "../admin/cli-error.ts";
import { showTyped } from "../admin/read-key-reference.ts";
import type { Config } from "../catalog/catalog.ts";
import { suggestName } from "../catalog/suggest-name.ts";
import { createNotWritableError, isSystemError } from "./download/create-not-writable-error.ts";
import { createProgressReporter, type ProgressOutput } from "./download/create-progress-reporter.ts";
import { describeFileDestination } from "./download/describe-file-destination.ts";
import { downloadModel } from "./download/download-model.ts";
import { formatBytes } from "./download/format-download-figures.ts";
import { resolveHuggingFaceEndpoint } from "./download/hugging-face-endpoint.ts";
import { ModelDownloadError } from "./download/model-download-error.ts";
import { resolveModelsFolder } from "./download/models-folder.ts";
import { describeModelUri, hasUriScheme } from "./download/parse-model-uri.ts";
import { redactUrlsInText } from "./download/redact-url.ts";
import { resolveModelSource } from "./resolve-model-source.ts";

const USAGE =
  "usage: tollgate models pull ID|URI (a catalogue model id, hf:ORG/REPO:QUANT or an http(s):// URL)";

/** What the command reads besides its arguments; tests replace it. */
export interface PullCommandEnvironment {
  /** For `TOLLGATE_MODELS_DIR`, `TOLLGATE_HF_ENDPOINT`, `HF_TOKEN`. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where the progress bar is drawn when it is a terminal; default `process.stderr`. Otherwise progress goes to `out` as lines. */
  terminal?: { isTTY?: boolean; columns?: number; write(text: string): unknown };
  signal?: AbortSignal;
}

/**
 * `tollgate models pull ID|URI`: downloads a model into the models folder (`TOLLGATE_MODELS_DIR`,
 * default `~/.cache/tollgate/models`) under the name the server looks for, so a later `serve`
 * finds it without the network. ID is a catalogue model id (its `engine.model` is pulled);
 * anything else must be a model URI. Progress is a redrawn bar on a terminal, else a line every
 * few seconds; an interrupted pull resumes where it stopped when run again.
 */
export async function runModelsPullCommand(
  config: Config,
  argv: string[],
  out: OutputSink,
  environment: PullCommandEnvironment = {},
): Promise<void> {
  const target = readTarget(argv);
  const env = environment.env ?? process.env;
  const modelsFolder = resolveModelsFolder(env);
  const found = findModel(config, target);
  if (found.type === "nothing") {
    // Nothing to pull is not a failure: pulling every model of a config must not stop at an
    // upstream one, as it does not at one whose local file is there.
    out.write(found.message);
    return;
  }
  const { model, modelId } = found;
  const source = resolveModelSource(model, { modelsFolder });
  switch (source.type) {
    case "file": {
      const found = await stat(source.path).catch(() => undefined);
      if (found?.isFile()) {
        out.write(`The model '${modelId}' uses the local file ${source.path}; there is nothing to download.`);
        return;
      }
      throw new CliError(
        `The model '${modelId}' uses the local file ${source.path}, which does not exist. Put a GGUF file there, or set its engine.model to a URI such as hf:ORG/REPO:Q4_K_M.`,
      );
    }
    case "unsupported":
      throw new CliError(
        `'${showTyped(redactUrlsInText(source.text))}' is not a model URI Tollgate can download; write hf:ORG/REPO:QUANT, hf:ORG/REPO/FILE.gguf or an http(s):// URL of a .gguf file.`,
      );
    case "remote":
      break;
    default: {
      const unexpected: never = source;
      throw new Error(`unexpected model source ${JSON.stringify(unexpected)}`);
    }
  }
  const shown = describeModelUri(source.uri);
  const reporter = createProgressReporter({ output: createOutput(environment, out), label: shown });
  let downloaded: Awaited<ReturnType<typeof downloadModel>>;
  try {
    downloaded = await downloadModel({
      uri: source.uri,
      modelsFolder,
      huggingFace: resolveHuggingFaceEndpoint(env),
      signal: environment.signal,
      onProgress: reporter.onProgress,
      onNotice: reporter.onNotice,
    });
  } catch (error) {
    reporter.finish();
    // A system error here comes from creating the models folder or the lock file (read-only, or
    // under a file); a failed write of the file itself arrives already as `not-writable`.
    const failure = isSystemError(error) ? createNotWritableError(error, modelsFolder) : error;
    if (failure instanceof ModelDownloadError) {
      // Offline: the file can come from elsewhere, under the name the server looks for (its 503 says
      // the same).
      const elsewhere =
        failure.failure === "unreachable"
          ? ` Or download it on a machine with network access and put the file at ${describeFileDestination(source.path)}.`
          : "";
      throw new CliError(`Cannot download ${shown}: ${failure.message}${adviseRetry(failure)}${elsewhere}`, {
        cause: failure,
      });
    }
    throw error;
  }
  reporter.finish();
  if (downloaded.alreadyPresent) {
    out.write(`Already downloaded: ${downloaded.path} (${formatBytes(downloaded.bytes)})`);
  } else {
    const verified = downloaded.sha256 === undefined ? "" : ", SHA-256 verified";
    out.write(`Saved ${downloaded.path} (${formatBytes(downloaded.bytes)}${verified})`);
  }
  if (modelId === undefined) {
    if (shown === source.uri.text) {
      out.write(`To serve it, set engine.model: "${shown}" on a model in tollgate.yaml.`);
    } else {
      // Not repeated: the URL's user, password or query (a signed URL's secret).
      out.write(
        `To serve it, set engine.model on a model in tollgate.yaml to the URL you gave (${shown}), its secret parts written as \${VARIABLE}s that the server's environment holds.`,
      );
    }
  }
}

function readTarget(argv: string[]): string {
  let positionals: string[];
  try {
    positionals = parseArgs({ args: argv, allowPositionals: true, options: {} }).positionals;
  } catch (error) {
    throw new CliError(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
  }
  const [target] = positionals;
  if (target === undefined || positionals.length > 1) throw new CliError(USAGE);
  return target;
}

/**
 * What `models pull` was asked for: an `engine.model` to pull (a catalogue model's, or the
 * argument itself when it is a URI), or a catalogue model that has no file (what to say).
 */
type PullTarget =
  | { type: "model"; model: string; modelId: string | undefined }
  | { type: "nothing"; message: string };

function findModel(config: Config, target: string): PullTarget {
  const entry = config.models.find((model) => model.id === target);
  if (entry !== undefined) {
    const engine = entry.engine;
    if (engine?.type === "llama") return { type: "model", model: engine.model, modelId: entry.id };
    const reason =
      engine === undefined ? "is not served by an engine here" : "is served by an upstream server";
    return { type: "nothing", message: `The model '${entry.id}' ${reason}; there is nothing to download.` };
  }
  if (hasUriScheme(target)) return { type: "model", model: target, modelId: undefined };
  const ids = config.models.map((model) => model.id);
  const suggestion = suggestName(target, ids);
  const hint = suggestion === undefined ? "" : ` Did you mean '${suggestion}'?`;
  const known = ids.length === 0 ? "" : ` Catalogue models: ${ids.join(", ")}.`;
  throw new CliError(
    `'${showTyped(target)}' is neither a catalogue model id nor a model URI.${hint}${known} A URI looks like hf:ORG/REPO:QUANT or https://HOST/PATH/model.gguf (http:// works too).`,
  );
}

function createOutput(environment: PullCommandEnvironment, out: OutputSink): ProgressOutput {
  const terminal = environment.terminal ?? process.stderr;
  if (terminal.isTTY === true) {
    return { type: "terminal", write: (text) => terminal.write(text), columns: terminal.columns };
  }
  return { type: "lines", write: (line) => out.write(line) };
}

/** What running the command again would do after `failure`: nothing said when it cannot help. */
export function adviseRetry(failure: ModelDownloadError): string {
  if (!failure.retryable) return "";
  const kept = failure.keptBytes ?? 0;
  return kept > 0
    ? ` Run the command again to resume the download (${formatBytes(kept)} kept).`
    : " Run the command again to retry.";
}
