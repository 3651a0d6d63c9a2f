import { stat } from "node:fs/promises";
import { join } from "node:path";
import { makeFolder } from "../../files/make-folder.ts";
import { acquireDownloadLock } from "./acquire-download-lock.ts";
import { createModelFileName } from "./create-model-file-name.ts";
import { type DownloadFileOptions, downloadFile } from "./download-file.ts";
import type { DownloadListener } from "./download-progress.ts";
import { findMissingGgufData } from "./find-missing-gguf-data.ts";
import { formatBytes } from "./format-download-figures.ts";
import type { HuggingFaceEndpoint } from "./hugging-face-endpoint.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { describeModelUri, type ModelUri } from "./parse-model-uri.ts";
import { resolveRemoteModelFile } from "./resolve-remote-model-file.ts";
import { retryTransientFailures } from "./retry-transient-failures.ts";
import { startsAsGguf } from "./starts-as-gguf.ts";

/** Options of {@link downloadModel}. */
export interface DownloadModelOptions extends DownloadListener {
  uri: ModelUri;
  /** The models folder (see models-folder.ts); created when a download starts. */
  modelsFolder: string;
  huggingFace: HuggingFaceEndpoint;
  /** Stops this caller's wait; the download itself stops when every caller has stopped waiting. */
  signal?: AbortSignal | undefined;
  /** Retry and timeout settings of the listing and the file download (tests shorten them). */
  transfer?: Pick<DownloadFileOptions, "maxAttempts" | "retryDelayMilliseconds" | "stallTimeoutMilliseconds">;
}

/** A model file in the models folder. */
export interface DownloadedModel {
  path: string;
  bytes: number;
  /** The SHA-256 the download was verified against; `undefined` when none was known or it was already there. */
  sha256: string | undefined;
  /** True when the file was already in the models folder and nothing was downloaded. */
  alreadyPresent: boolean;
}

interface SharedDownload {
  promise: Promise<DownloadedModel>;
  listeners: Set<DownloadListener>;
  controller: AbortController;
}

/** Downloads under way in this process, by destination path. */
const active = new Map<string, SharedDownload>();

/**
 * Makes a model URI's file present in the models folder, under its stable name
 * (create-model-file-name.ts), and returns its path. A GGUF file already there is used as it is;
 * anything else there (a web page saved by an earlier version), or a GGUF file shorter than its
 * header says (a download an earlier version saved cut short), is downloaded again.
 * Otherwise the URI is resolved (an `hf:` URI through the repository listing, retried like the
 * file after a 5xx, 429 or broken connection) and the file is downloaded by download-file.ts
 * (resumable, verified, atomic). Callers in this process asking
 * for the same file share one download and all hear its progress; other processes wait on a lock
 * file beside it (acquire-download-lock.ts) and then find the file there.
 */
export async function downloadModel(options: DownloadModelOptions): Promise<DownloadedModel> {
  const destination = join(options.modelsFolder, createModelFileName(options.uri));
  const present = await readModelFile(destination);
  if (present.model !== undefined) return present.model;
  let shared = active.get(destination);
  // A download whose callers all gave up is winding down: a new caller starts afresh (and waits
  // for the old one's lock file to go).
  if (shared === undefined || shared.controller.signal.aborted) {
    const started = startDownload(destination, options);
    active.set(destination, started);
    const forget = () => {
      if (active.get(destination) === started) active.delete(destination);
    };
    started.promise.then(forget, forget);
    shared = started;
  }
  return waitForDownload(shared, options, options.signal);
}

/**
 * The file at `path` as an already present model; no `model` when there is none, or when what
 * is there is not a GGUF file or lacks part of its tensor data (it is replaced by the download;
 * `unusable` says why).
 */
async function readModelFile(path: string): Promise<{ model?: DownloadedModel; unusable?: string }> {
  const found = await stat(path).catch(() => undefined);
  if (found === undefined) return {};
  if (!found.isFile() || !(await startsAsGguf(path))) return { unusable: "is not a GGUF model file" };
  const missing = await findMissingGgufData(path);
  if (missing !== undefined) return { unusable: `is not a whole GGUF model file (${missing})` };
  return { model: { path, bytes: found.size, sha256: undefined, alreadyPresent: true } };
}

function startDownload(destination: string, options: DownloadModelOptions): SharedDownload {
  const listeners = new Set<DownloadListener>();
  const controller = new AbortController();
  const signal = controller.signal;
  const notice = (message: string) => {
    for (const listener of listeners) listener.onNotice?.(message);
  };
  const run = async (): Promise<DownloadedModel> => {
    // A 503 or a reset from the hub is as passing for the listing as for the file.
    const remote = await retryTransientFailures(
      () => resolveRemoteModelFile({ uri: options.uri, endpoint: options.huggingFace, signal }),
      {
        maxAttempts: options.transfer?.maxAttempts,
        retryDelayMilliseconds: options.transfer?.retryDelayMilliseconds,
        signal,
        onNotice: notice,
      },
    );
    await makeFolder(options.modelsFolder);
    const lock = await acquireDownloadLock({
      path: `${destination}.lock`,
      signal,
      onWait: () => notice("Another process is downloading this model; waiting for it to finish."),
    });
    try {
      const present = await readModelFile(destination);
      if (present.model !== undefined) return present.model;
      if (present.unusable !== undefined) notice(`${destination} ${present.unusable}; downloading it again.`);
      const size = remote.size === undefined ? "" : ` (${formatBytes(remote.size)})`;
      const source =
        options.uri.type === "hugging-face"
          ? `${remote.name}${size} from ${options.uri.text}`
          : `${describeModelUri(options.uri)}${size}`;
      notice(`Downloading ${source} to ${destination}`);
      const endpointOrigin = new URL(options.huggingFace.baseUrl).origin;
      const token = options.huggingFace.token;
      const file = await downloadFile({
        ...options.transfer,
        url: remote.url,
        destination,
        expectedSize: remote.size,
        expectedSha256: remote.sha256,
        // A file replaced on the hub during the download is checked against its new listing.
        refreshExpected: async () => {
          const now = await resolveRemoteModelFile({
            uri: options.uri,
            endpoint: options.huggingFace,
            signal,
          });
          // Another file chosen now (a quantisation renamed): nothing known of the one downloaded.
          return now.url === remote.url
            ? { size: now.size, sha256: now.sha256 }
            : { size: undefined, sha256: undefined };
        },
        authorize: (url) =>
          token !== undefined && url.origin === endpointOrigin ? `Bearer ${token}` : undefined,
        trustedEtagOrigin: endpointOrigin,
        signal,
        ensureLockHeld: async () => {
          if (!(await lock.isHeld())) throw createLockLostError(destination);
        },
        onProgress: (progress) => {
          for (const listener of listeners) listener.onProgress?.(progress);
        },
        onNotice: notice,
      });
      return { path: file.path, bytes: file.bytes, sha256: file.sha256, alreadyPresent: false };
    } finally {
      await lock.release();
    }
  };
  return { promise: run(), listeners, controller };
}

/**
 * The error of a download whose lock another process took over, as one of another machine may
 * when this one stops refreshing it for a while (paused, or its machine asleep): that process
 * finishes the file.
 */
function createLockLostError(destination: string): ModelDownloadError {
  return new ModelDownloadError(
    "interrupted",
    `Another process took over the download to ${destination} while this one did not refresh its lock file (${destination}.lock); this one stopped without saving the file.`,
  );
}

/** Waits for a shared download as one of its callers. */
function waitForDownload(
  shared: SharedDownload,
  listener: DownloadListener,
  signal: AbortSignal | undefined,
): Promise<DownloadedModel> {
  const own: DownloadListener = { onProgress: listener.onProgress, onNotice: listener.onNotice };
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      void leave().then(() => reject(signal.reason));
      return;
    }
    shared.listeners.add(own);
    const onAbort = () => {
      void leave().then(() => reject(signal?.reason));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    shared.promise.then(
      (model) => {
        signal?.removeEventListener("abort", onAbort);
        shared.listeners.delete(own);
        resolve(model);
      },
      (error: unknown) => {
        signal?.removeEventListener("abort", onAbort);
        shared.listeners.delete(own);
        reject(error);
      },
    );
  });

  /**
   * Leaves the download; the last caller to leave stops it, and is answered once it has wound
   * down (its lock file released, the partial file closed): a `models pull` stopped by Ctrl-C
   * exits right after, and left its lock file behind, which a replica of another machine sharing
   * the folder then waited out (30 s).
   */
  async function leave(): Promise<void> {
    shared.listeners.delete(own);
    if (shared.listeners.size > 0) return;
    // The last caller gone: nobody wants the file any more.
    shared.controller.abort(signal?.reason);
    await shared.promise.catch(() => {});
  }
}
