import { statSync } from "node:fs";

/**
 * What tells one version of a file from another without reading it: the inode (a file moved into
 * place with `mv` is a new one), the size and the modification and change times (a file written
 * over in place keeps its inode; its change time moves even when its modification time is set back,
 * as `cp -p` does).
 */
export interface FileIdentity {
  device: bigint;
  inode: bigint;
  /** Bytes. */
  size: bigint;
  modifiedNanoseconds: bigint;
  changedNanoseconds: bigint;
}

/** The identity of the file at `path` now; `undefined` when there is none (or it cannot be read). */
export function readFileIdentity(path: string): FileIdentity | undefined {
  try {
    const found = statSync(path, { bigint: true, throwIfNoEntry: false });
    if (found === undefined) return undefined;
    return {
      device: found.dev,
      inode: found.ino,
      size: found.size,
      modifiedNanoseconds: found.mtimeNs,
      changedNanoseconds: found.ctimeNs,
    };
  } catch {
    return undefined;
  }
}

/** Whether two identities are those of the same version of a file. */
export function isSameFileIdentity(first: FileIdentity, second: FileIdentity): boolean {
  return (
    first.device === second.device &&
    first.inode === second.inode &&
    first.size === second.size &&
    first.modifiedNanoseconds === second.modifiedNanoseconds &&
    first.changedNanoseconds === second.changedNanoseconds
  );
}
