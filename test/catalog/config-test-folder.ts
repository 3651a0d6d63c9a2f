/** Temporary folders holding config files for the catalogue tests. */
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ConfigError } from "../../src/catalog/config-error.ts";
import { type LoadConfigOptions, type LoadedConfig, loadConfig } from "../../src/catalog/load-config.ts";

/** Modification time given to every written file: `created` of models that do not set it. */
export const FILE_TIME_SECONDS = 1_700_000_000;

export interface ConfigTestFolder {
  path: string;
  /** Writes a file (creating folders) with the fixed modification time; returns its absolute path. */
  write(relativePath: string, text: string): Promise<string>;
  /** Loads with this folder as working folder and an empty environment unless given. */
  load(options?: LoadConfigOptions): Promise<LoadedConfig>;
  /** The problems of a load that must fail, one formatted line each. */
  problemsOf(options?: LoadConfigOptions): Promise<string[]>;
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
    load: (options = {}) => loadConfig({ cwd: path, env: {}, ...options }),
    async problemsOf(options = {}) {
      try {
        await loadConfig({ cwd: path, env: {}, ...options });
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        return error.problems.map((problem) => `${problem.field}: ${problem.message}`);
      }
      throw new Error("the configuration loaded without error");
    },
    remove: () => rm(path, { recursive: true, force: true }),
  };
}
