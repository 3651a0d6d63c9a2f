/** Temporary folders holding config files for the catalogue tests. */
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** Modification time given to every written file: `created` of models that do not set it. */
export const FILE_TIME_SECONDS = 1_700_000_000;

export interface ConfigTestFolder {
  path: string;
  /** Writes a file (creating folders) with the fixed modification time; returns its absolute path. */
  write(relativePath: string, text: string): Promise<string>;
  remove(): Promise<void>;
}

export async function createConfigTestFolder(): Promise<ConfigTestFolder> {
  const path = await mkdtemp(join(tmpdir(), "tollgate-config-"));
  return {
    path,
    async write(relativePath, text) {
      const file = join(path, relativePath);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, text);
      await utimes(file, FILE_TIME_SECONDS, FILE_TIME_SECONDS);
      return file;
    },
    remove: () => rm(path, { recursive: true, force: true }),
  };
}
