/**
 * Where the configured admin key comes from, as an operator would change it: `TOLLGATE_ADMIN_KEY`
 * when that variable is set (it wins over the file, as in load-config.ts), else the config
 * file's `admin_key`.
 */
export function nameAdminKeySource(
  configFile: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const variable = env.TOLLGATE_ADMIN_KEY;
  if (variable !== undefined && variable !== "") return "TOLLGATE_ADMIN_KEY";
  return configFile === undefined ? "admin_key" : `admin_key in ${configFile}`;
}
