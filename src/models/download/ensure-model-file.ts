import { resolveModelSource } from "../resolve-model-source.ts";
import { createNotWritableError, isSystemError } from "./create-not-writable-error.ts";
import type { ProgressOutput } from "./create-progress-reporter.ts";
import { describeFileDestination } from "./describe-file-destination.ts";
import { resolveHuggingFaceEndpoint } from "./hugging-face-endpoint.ts";
import { ModelDownloadError, type ModelDownloadFailure } from "./model-download-error.ts";
import { resolveModelsFolder } from "./models-folder.ts";
import { describeModelUri } from "./parse-model-uri.ts";

/** Where a server logs download progress (pino's shape). */
export interface DownloadLogger {
  info(object: object, message?: string): void;
}

/** Options of {@link ensureModelFile}. */
export interface EnsureModelFileOptions {
  /** `engine.model`: a file path (returned as it is) or a model URI. */
  model: string;
  /** Aborts the download (the server is closing). */
  signal: AbortSignal;
  /** Progress lines and the end of the download; a terminal on stderr gets a progress bar instead. */
  logger?: DownloadLogger | undefined;
  /** For `TOLLGATE_MODELS_DIR`, `TOLLGATE_HF_ENDPOINT`, `HF_TOKEN`. Default `process.env`. */
  env?: NodeJS.ProcessEnv | undefined;
}

/**
 * The local file of a llama model's `engine.model`, for a server about to load it: a path as it
 * is; for a URI, its file in the models folder, downloaded first when it is not there yet. When
 * the file cannot be had (no network, 404, checksum, a folder that cannot be written), throws a
 * {@link ModelDownloadError} whose message says what happened and how to fix it: pull it
 * elsewhere and put it at the path given, or point `engine.model` at a local file.
 */
export async function ensureModelFile(options: EnsureModelFileOptions): Promise<string> {
  const env = options.env ?? process.env;
  const modelsFolder = resolveModelsFolder(env);
  const source = resolveModelSource(options.model, { modelsFolder });
  switch (source.type) {
    case "file":
      return source.path;
    case "unsupported":
      throw new ModelDownloadError(
        "unsupported-source",
        `engine.model '${source.text}' is neither a file path nor a model URI Tollgate can download; write hf:ORG/REPO:QUANT, an http(s):// URL of a .gguf file, or a GGUF file path.`,
      );
    case "remote":
      break;
    default: {
      const unexpected: never = source;
      throw new Error(`unexpected model source ${JSON.stringify(unexpected)}`);
    }
  }
  const shown = describeModelUri(source.uri);
  // The downloader is imported only for a model URI: a model served from a local path never
  // loads it.
  const [{ createProgressReporter }, { downloadModel }] = await Promise.all([
    import("./create-progress-reporter.ts"),
    import("./download-model.ts"),
  ]);
  const reporter = createProgressReporter({
    output: createProgressOutput(options.logger, shown),
    label: shown,
  });
  try {
    const downloaded = await downloadModel({
      uri: source.uri,
      modelsFolder,
      huggingFace: resolveHuggingFaceEndpoint(env),
      signal: options.signal,
      onProgress: reporter.onProgress,
      onNotice: reporter.onNotice,
    });
    reporter.finish();
    if (!downloaded.alreadyPresent) {
      options.logger?.info(
        { source: shown, path: downloaded.path, bytes: downloaded.bytes, sha256: downloaded.sha256 ?? null },
        "model downloaded",
      );
    }
    return downloaded.path;
  } catch (error) {
    reporter.finish();
    if (options.signal.aborted) throw error;
    // A system error here comes from creating the folder or the lock file; a failed write of the
    // file itself arrives already as `not-writable`.
    const failure = isSystemError(error) ? createNotWritableError(error, modelsFolder) : error;
    if (failure instanceof ModelDownloadError) {
      const what = failure.failure === "not-writable" ? "saved" : "downloaded";
      const fix = describeFix(failure.failure, {
        shown,
        shownWhole: source.uri.type === "hugging-face" || shown === source.uri.url.href,
        path: source.path,
        modelsFolder,
        transient: failure.transient,
      });
      throw new ModelDownloadError(
        failure.failure,
        `Its file could not be ${what}: ${failure.message} ${fix}`,
        {
          cause: failure,
        },
      );
    }
    throw error;
  }
}

/**
 * What an operator can do about a failed download, for its kind: mend the cause, then reload the
 * server (SIGHUP retries the download of a model left unavailable) or restart it; or bring the
 * file from elsewhere, or serve a local file instead. A cause that may pass (`transient`) needs
 * nothing: the server tries again by itself (retry-model-download.ts).
 */
function describeFix(
  failure: ModelDownloadFailure,
  context: { shown: string; shownWhole: boolean; path: string; modelsFolder: string; transient: boolean },
): string {
  // A URL shown without its query or credentials (they may hold a token) is no command to run:
  // pulled so, it named another file, and lacked the token.
  const pull = context.shownWhole
    ? `\`tollgate models pull ${context.shown}\``
    : "`tollgate models pull URL`, with engine.model's URL whole (its query and credentials are not repeated here),";
  const elsewhere = `run ${pull} on a machine with network access and put the file at ${describeFileDestination(context.path)}; or serve a local GGUF file instead: name it in engine.model in tollgate.yaml (README, Start: \`tollgate models make-test FILE\` writes a tiny one to try the service with).`;
  switch (failure) {
    case "unreachable":
    case "interrupted":
    case "server-error":
      return `${context.transient ? "The server tries the download again by itself, less and less often (at least every 5 minutes). " : ""}To fix it, let this machine reach the network (or wait for the server to answer again), then reload the server (SIGHUP) or restart it; or ${elsewhere}`;
    case "not-writable":
      return `To fix it, mend ${context.modelsFolder} as the reason says (make room there, make it writable, or make it a folder), then reload the server (SIGHUP) or restart it; or restart it with TOLLGATE_MODELS_DIR set to a folder on a disk with room, or serve a local GGUF file instead (engine.model in tollgate.yaml).`;
    case "access-denied":
    case "misconfigured":
      return `To fix it, set the variable and restart the server, or correct engine.model and reload the server (SIGHUP); or ${elsewhere}`;
    case "size-mismatch":
    case "checksum":
    case "invalid-response":
      return `To download it again, reload the server (SIGHUP) or restart it; or ${elsewhere}`;
    case "not-found":
    case "no-matching-file":
    case "unsupported-source":
      return `To fix it, correct engine.model and reload the server (SIGHUP) or restart it; or ${elsewhere}`;
    default: {
      const unexpected: never = failure;
      throw new Error(`unknown download failure ${String(unexpected)}`);
    }
  }
}

/** A redrawn bar when stderr is a terminal (an operator watching), else log lines. */
function createProgressOutput(logger: DownloadLogger | undefined, shown: string): ProgressOutput {
  const terminal = process.stderr;
  if (terminal.isTTY) {
    return { type: "terminal", write: (text) => terminal.write(text), columns: terminal.columns };
  }
  return { type: "lines", write: (line) => logger?.info({ source: shown }, line) };
}
