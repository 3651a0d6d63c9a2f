import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * `engines.node` in package.json promises the oldest Node that runs Tollgate; every package
 * installed with it must accept that Node too, or `npm install` warns on it and refuses it with
 * `engine-strict`. One known exception: undici 8 asks for 22.19, for zstd in its HTTP cache,
 * which it checks for before use and Tollgate does not use; Tollgate's tests pass on 22.18 with
 * it. undici 7, which accepts 22.18, crashes the process when a server closes a connection
 * whose body is paused (nodejs/undici#5360; test/models/download-broken-body.test.ts).
 */
const KNOWN_EXCEPTIONS = ["node_modules/undici: node >=22.19.0"];

interface LockfileEntry {
  dev?: boolean;
  engines?: { node?: string } | string[];
}

const readJson = (path: string): unknown => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8"));

type Version = [number, number, number];

/** `22.18`, `v22.18.0`, `22.x` or `22.*` as a version (missing and wildcard parts are 0). */
function parseVersion(text: string): { version: Version; parts: number } {
  const pieces = text
    .replace(/^v/, "")
    .split(".")
    .filter((piece) => piece !== "x" && piece !== "*" && piece !== "");
  const numbers = pieces.map(Number);
  if (numbers.length === 0 || numbers.some((number) => !Number.isInteger(number)))
    throw new Error(`not a version: ${text}`);
  return { version: [numbers[0] ?? 0, numbers[1] ?? 0, numbers[2] ?? 0], parts: numbers.length };
}

function compare(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** Whether `node` satisfies one comparator: `>=20`, `<7`, `^18`, `14`, `6.*`, ... */
function satisfiesComparator(node: Version, comparator: string): boolean {
  const match = /^(>=|<=|>|<|\^|~|=)?(.+)$/.exec(comparator);
  if (match === null) throw new Error(`not a comparator: ${comparator}`);
  const [, operator, text = ""] = match;
  const { version, parts } = parseVersion(text);
  const order = compare(node, version);
  switch (operator) {
    case ">=":
      return order >= 0;
    case ">":
      return order > 0;
    case "<=":
      return order <= 0;
    case "<":
      return order < 0;
    case "^":
      return order >= 0 && node[0] === version[0];
    case "~":
      return order >= 0 && node[0] === version[0] && (parts < 2 || node[1] === version[1]);
    default:
      // A bare (or `=`) version matches what it names: `14` any 14.x.y, `14.17` any 14.17.y.
      return node.slice(0, parts).every((part, index) => part === version[index]);
  }
}

/** Whether `node` satisfies an npm range of `||`-joined sets of comparators. */
function satisfiesRange(node: Version, range: string): boolean {
  return range.split("||").some((set) =>
    set
      .trim()
      .replace(/(>=|<=|>|<|\^|~|=)\s+/g, "$1")
      .split(/\s+/)
      .every((comparator) => comparator === "*" || satisfiesComparator(node, comparator)),
  );
}

describe("engines", () => {
  it("reads npm's ranges", () => {
    const node = parseVersion("22.18.0").version;
    for (const range of [
      ">=22.18",
      "^20.17.0 || >=22.9.0",
      ">= 10.x",
      "6.* || 8.* || >= 10.*",
      "22",
      "~22.18.0",
    ])
      expect(satisfiesRange(node, range), range).toBe(true);
    for (const range of [">=22.19.0", "^18 || ^20", "16 || 14 >=14.17", "<22", "~22.17"])
      expect(satisfiesRange(node, range), range).toBe(false);
  });

  it("every installed package accepts the oldest Node that package.json promises", () => {
    const manifest = readJson("../package.json") as { engines: { node: string } };
    const oldest = /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(manifest.engines.node)?.[1];
    if (oldest === undefined) throw new Error(`engines.node is not ">=VERSION": ${manifest.engines.node}`);
    const node = parseVersion(oldest).version;
    const lockfile = readJson("../package-lock.json") as { packages: Record<string, LockfileEntry> };
    const refusing = Object.entries(lockfile.packages)
      .filter(([location, entry]) => location !== "" && entry.dev !== true)
      .flatMap(([location, entry]) => {
        const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
        return range === undefined || satisfiesRange(node, range) ? [] : [`${location}: node ${range}`];
      });
    expect(refusing).toEqual(KNOWN_EXCEPTIONS);
  });
});
