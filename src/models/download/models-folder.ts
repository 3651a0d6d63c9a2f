import { homedir } from "node:os";
import { join, resolve } from "node:path";

/**
 * The folder downloaded models are kept in: `TOLLGATE_MODELS_DIR` (resolved against the working
 * directory) when set and not empty, else `~/.cache/tollgate/models`.
 */
export function resolveModelsFolder(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.TOLLGATE_MODELS_DIR;
  if (configured !== undefined && configured !== "") return resolve(configured);
  return join(homedir(), ".cache", "tollgate", "models");
}
