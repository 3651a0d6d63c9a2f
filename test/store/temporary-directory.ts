import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll } from "vitest";

/**
 * A fresh folder under the system temp dir, removed after the test file's last test. Call it at
 * the top level of a test file or of a `describe` block, not inside a test or hook.
 */
export function makeTemporaryDirectory(): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), "tollgate-test-"));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

/** A path for a new SQLite file in `directory`, different on every call. */
export function newDatabaseUrl(directory: string): string {
  sequence += 1;
  return `sqlite:${path.join(directory, `store-${sequence}.db`)}`;
}

let sequence = 0;
