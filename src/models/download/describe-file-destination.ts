import { existsSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Where an operator who brings a model file from elsewhere puts it, for "put the file at ...":
 * the path, and its folder to create first when that does not exist yet (a download that could
 * not reach the network never made the models folder, and a copy into a missing folder fails).
 */
export function describeFileDestination(path: string): string {
  const folder = dirname(path);
  return existsSync(folder) ? path : `${path} (create its folder ${folder} first)`;
}
