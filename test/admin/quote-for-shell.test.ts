import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { quoteForShell } from "../../src/admin/quote-for-shell.ts";

describe("quoteForShell", () => {
  it.each([
    "plain",
    "",
    `{"model":"bob's \\"best\\" model","messages":[]}`,
    "it's $HOME `date` \\ ; | & *",
    "'",
    "''\n'",
  ])("makes %j one word that a shell gives back as it is", (text) => {
    const echoed = spawnSync("sh", ["-c", `printf %s ${quoteForShell(text)}`], { encoding: "utf8" });
    expect(echoed.status).toBe(0);
    expect(echoed.stdout).toBe(text);
  });
});
