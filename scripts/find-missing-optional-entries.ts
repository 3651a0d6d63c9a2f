/** The parts of an npm v3 lockfile this needs. */
export interface Lockfile {
  packages: Record<string, LockEntry>;
}

export interface LockEntry {
  version?: string;
  optional?: boolean;
  dev?: boolean;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  optionalDependencies?: Record<string, string>;
}

const OPERATING_SYSTEMS: Record<string, string> = {
  darwin: "darwin",
  mac: "darwin",
  win32: "win32",
  win: "win32",
  linux: "linux",
  android: "android",
  freebsd: "freebsd",
};
const CPUS: Record<string, string> = {
  x64: "x64",
  arm64: "arm64",
  arm: "arm",
  armv7l: "arm",
  riscv64: "riscv64",
  ia32: "ia32",
};

/**
 * The optional dependencies that the lockfile names but has no entry for, each with the entry
 * to add: its version, and its platform read from its name (`cli-darwin-arm64`, `win-x64-cuda`,
 * `cli-linux-x64-musl`).
 */
export function findMissingOptionalEntries(lockfile: Lockfile): { location: string; entry: LockEntry }[] {
  const missing: { location: string; entry: LockEntry }[] = [];
  for (const parent of Object.values(lockfile.packages)) {
    for (const [name, version] of Object.entries(parent.optionalDependencies ?? {})) {
      const location = `node_modules/${name}`;
      if (lockfile.packages[location] !== undefined || missing.some((item) => item.location === location))
        continue;
      const parts = (name.split("/").at(-1) ?? name).split("-");
      const os = parts.map((part) => OPERATING_SYSTEMS[part]).find((value) => value !== undefined);
      const cpu = parts.map((part) => CPUS[part]).find((value) => value !== undefined);
      missing.push({
        location,
        // Keys in the order npm writes them (`version`, then by name): otherwise every
        // `npm install` rewrote the lockfile, its only change the order.
        entry: {
          version,
          ...(cpu === undefined ? {} : { cpu: [cpu] }),
          ...(parent.dev ? { dev: true } : {}),
          ...(parts.includes("musl") ? { libc: ["musl"] } : {}),
          optional: true,
          ...(os === undefined ? {} : { os: [os] }),
        },
      });
    }
  }
  return missing;
}
