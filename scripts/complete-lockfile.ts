/**
 * `npm run lock:complete`: adds the lock entries npm leaves out for other platforms' optional
 * packages (the macOS, Windows and riscv builds of node-llama-cpp and Biome).
 *
 * Why: the registry this project is built against serves only the packages of the platforms
 * it builds on, so `npm install` writes a lockfile without the other platforms' optional
 * packages, and `npm ci` then refuses that lockfile ("Missing: ... from lock file"). Each added
 * entry carries the version, os, cpu and libc that npm needs to skip the package on other
 * platforms (and to fetch it from the registry on its own platform). Run it after every change
 * of dependencies; `test/lockfile.test.ts` fails when it is needed.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { findMissingOptionalEntries, type Lockfile } from "./find-missing-optional-entries.ts";

const path = process.argv[2] ?? "package-lock.json";
const lockfile = JSON.parse(readFileSync(path, "utf8")) as Lockfile;
const missing = findMissingOptionalEntries(lockfile);
for (const { location, entry } of missing) lockfile.packages[location] = entry;
// Where npm puts them: its packages are sorted by location (`localeCompare` in English).
lockfile.packages = Object.fromEntries(
  Object.entries(lockfile.packages).sort(([a], [b]) => a.localeCompare(b, "en")),
);
writeFileSync(path, `${JSON.stringify(lockfile, null, 2)}\n`);
process.stdout.write(`${path}: added ${missing.length} optional platform entries\n`);
