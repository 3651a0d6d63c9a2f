import { describe, expect, it } from "vitest";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";

describe("llama.cpp's messages about a grammar", () => {
  // Regression: a client's schema that llama.cpp refused wrote an error line to the server's log.
  it("are logged as warnings: grammars come from clients' schemas", async () => {
    const lines: { level: string; message: string | undefined }[] = [];
    const logger = {
      info: () => {},
      warn: (_object: object, message?: string) => lines.push({ level: "warn", message }),
      error: (_object: object, message?: string) => lines.push({ level: "error", message }),
    };
    const llama = await getSharedLlama({ gpu: false, logger });
    await expect(llama.createGrammar({ grammar: 'root ::= root "a"' })).rejects.toThrow();
    // The messages come through a queue, a moment later.
    for (let waited = 0; waited < 2000 && lines.length === 0; waited += 50)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lines.some(({ message }) => message?.includes("left recursion"))).toBe(true);
    expect(lines.filter(({ level }) => level === "error")).toEqual([]);
  });
});
