import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { findMissingOptionalEntries, type Lockfile } from "../scripts/find-missing-optional-entries.ts";

describe("package-lock.json", () => {
  it("has an entry for every optional platform package, or `npm ci` refuses it (run `npm run lock:complete`)", () => {
    const lockfile = JSON.parse(
      readFileSync(new URL("../package-lock.json", import.meta.url), "utf8"),
    ) as Lockfile;
    expect(findMissingOptionalEntries(lockfile).map((item) => item.location)).toEqual([]);
  });

  it("describes the root package as package.json does, so that `npm install` leaves the lockfile as it is", () => {
    const read = (name: string) => JSON.parse(readFileSync(new URL(`../${name}`, import.meta.url), "utf8"));
    const manifest = read("package.json") as Record<string, unknown>;
    const root = (read("package-lock.json") as { packages: Record<string, Record<string, unknown>> })
      .packages[""];
    for (const field of ["name", "version", "license", "engines", "dependencies", "devDependencies"]) {
      expect(root?.[field], field).toEqual(manifest[field]);
    }
    // npm writes a bin's path without its leading `./`.
    const bins = Object.entries(manifest.bin as Record<string, string>);
    expect(root?.bin).toEqual(
      Object.fromEntries(bins.map(([name, path]) => [name, path.replace(/^\.\//, "")])),
    );
  });

  it("reads a platform from a package's name", () => {
    const missing = findMissingOptionalEntries({
      packages: {
        "": { optionalDependencies: { "@x/cli-darwin-arm64": "1.0.0", "@x/cli-linux-x64-musl": "1.0.0" } },
      },
    });
    expect(missing).toEqual([
      {
        location: "node_modules/@x/cli-darwin-arm64",
        entry: { version: "1.0.0", optional: true, os: ["darwin"], cpu: ["arm64"] },
      },
      {
        location: "node_modules/@x/cli-linux-x64-musl",
        entry: { version: "1.0.0", optional: true, os: ["linux"], cpu: ["x64"], libc: ["musl"] },
      },
    ]);
  });

  it("writes an entry's keys in npm's order, so that `npm install` leaves the lockfile as it is", () => {
    const [added] = findMissingOptionalEntries({
      packages: { "": { optionalDependencies: { "@x/cli-linux-x64-musl": "1.0.0" } }, x: { dev: true } },
    });
    expect(Object.keys(added?.entry ?? {})).toEqual(["version", "cpu", "libc", "optional", "os"]);
  });
});
