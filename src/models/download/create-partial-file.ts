import { readFile, rm, writeFile } from "node:fs/promises";

/** What the answer that started a partial file said of the file, kept for resuming it. */
export interface PartialFileVersion {
  /** Its strong `ETag`, else its `Last-Modified`, sent as `If-Range`; `undefined` when it had neither. */
  validator: string | undefined;
  /** The whole file's size in bytes; `undefined` when the answer did not say. */
  size: number | undefined;
}

/** A partial download and, beside it, the version of the file it holds the start of. */
export interface PartialFile {
  path: string;
  /** The kept version; both parts `undefined` when none is kept. */
  readVersion(): Promise<PartialFileVersion>;
  /** Keeps a new partial file's version (or forgets it when nothing of it is known). */
  keepVersion(version: PartialFileVersion): Promise<void>;
  forgetVersion(): Promise<void>;
  /** Deletes the partial file and its version. */
  remove(): Promise<void>;
}

/**
 * The partial file at `path`; its version is kept in `PATH.validator` as two lines, the validator
 * and the size (either may be empty). A file of an older version holds the validator alone.
 */
export function createPartialFile(path: string): PartialFile {
  const versionPath = `${path}.validator`;
  const forgetVersion = () => rm(versionPath, { force: true });
  return {
    path,
    readVersion: async () => {
      const text = await readFile(versionPath, "utf8").catch(() => "");
      const [validator = "", size = ""] = text.split("\n").map((line) => line.trim());
      return {
        validator: validator === "" ? undefined : validator,
        size: /^\d+$/.test(size) ? Number(size) : undefined,
      };
    },
    keepVersion: async ({ validator, size }) => {
      if (validator === undefined && size === undefined) await forgetVersion();
      else await writeFile(versionPath, `${validator ?? ""}\n${size ?? ""}\n`);
    },
    forgetVersion,
    remove: async () => {
      await rm(path, { force: true });
      await forgetVersion();
    },
  };
}
