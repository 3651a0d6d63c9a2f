import { join } from "node:path";
import { afterAll, beforeAll, expect } from "vitest";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import {
  createModelBytes,
  type ModelFileServer,
  type ServedFile,
  startModelFileServer,
} from "./model-file-server.ts";

/** Download settings for tests: retries at once, and a stall only a test's own server makes. */
export const QUICK_DOWNLOAD = { retryDelayMilliseconds: 1, stallTimeoutMilliseconds: 5000 };

/** A model file server for one test file, and the folder its downloads go to. */
export interface ServedModelFiles {
  /** The test file's own folder for destinations (removed after the file's tests). */
  readonly folder: string;
  /** Started before the file's tests, closed after them. */
  readonly server: ModelFileServer;
  /** The generated model the server serves. */
  readonly model: { bytes: Buffer; sha256: string };
  /**
   * Serves the model at a fresh name (`served` adds to or overrides its entry; a function of the
   * call's sequence number, for values that must differ per file) and gives a fresh destination.
   */
  prepare(served?: Partial<ServedFile> | ((sequence: number) => Partial<ServedFile>)): {
    url: string;
    name: string;
    destination: string;
    sequence: number;
  };
}

/**
 * Starts a model file server serving the model of `seed` for the calling test file (its hooks
 * are registered here); file names and destinations are `PREFIX-N.gguf`.
 */
export function serveModelFiles(options: { seed: number; prefix: string }): ServedModelFiles {
  const folder = makeTemporaryDirectory();
  let server: ModelFileServer | undefined;
  let model: { bytes: Buffer; sha256: string } | undefined;
  let sequence = 0;
  beforeAll(async () => {
    [server, model] = await Promise.all([startModelFileServer(), createModelBytes(options.seed)]);
  });
  afterAll(async () => {
    await server?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the model file server starts in beforeAll");
    return value;
  };
  return {
    folder,
    get server() {
      return started(server);
    },
    get model() {
      return started(model);
    },
    prepare(served = {}) {
      sequence += 1;
      const name = `/files/${options.prefix}-${sequence}.gguf`;
      const extra = typeof served === "function" ? served(sequence) : served;
      started(server).files.set(name, { bytes: started(model).bytes, ...extra });
      return {
        url: `${started(server).baseUrl}${name}`,
        name,
        destination: join(folder, `${options.prefix}-${sequence}.gguf`),
        sequence,
      };
    },
  };
}

/** The ModelDownloadError `promise` rejects with; fails the test when it does not. */
export async function expectDownloadError(promise: Promise<unknown>): Promise<ModelDownloadError> {
  const error = await promise.catch((caught: unknown) => caught);
  expect(error).toBeInstanceOf(ModelDownloadError);
  return error as ModelDownloadError;
}
