import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import "../../src/process/drop-sqlite-warning.ts";

describe("the CLI's warning filter", () => {
  const heard: string[] = [];
  const listen = (warning: Error) => heard.push(`${warning.name}: ${warning.message}`);
  process.on("warning", listen);
  afterEach(() => {
    heard.length = 0;
  });

  it("drops Node 22's warning that SQLite is experimental", async () => {
    process.emitWarning(
      "SQLite is an experimental feature and might change at any time",
      "ExperimentalWarning",
    );
    process.emitWarning("SQLite is an experimental feature and might change at any time", {
      type: "ExperimentalWarning",
    });
    // Warnings are emitted on the next tick: one emitted after them arrives after them.
    process.emitWarning("the marker", "MarkerWarning");
    await once(process, "warning");
    expect(heard).toEqual(["MarkerWarning: the marker"]);
  });

  it("passes every other warning on", async () => {
    process.emitWarning("Some feature is an experimental feature", "ExperimentalWarning");
    process.emitWarning("SQLite is an experimental feature", "DeprecationWarning");
    await once(process, "warning");
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard).toEqual([
      "ExperimentalWarning: Some feature is an experimental feature",
      "DeprecationWarning: SQLite is an experimental feature",
    ]);
  });
});
