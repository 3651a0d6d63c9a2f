/**
 * A config file must be UTF-8. Read as UTF-8 with replacement characters, a Latin-1
 * `id: "café"` became the model `caf\uFFFD` (at start and on every reload, which reads the file
 * the same way), and a UTF-16 file gave "must be a YAML mapping" quoting garbage: now the load
 * fails, naming the line and byte that are not UTF-8, or UTF-16 by name.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decodeConfigText } from "../../src/catalog/decode-config-text.ts";
import { type ConfigTestFolder, createConfigTestFolder } from "./config-test-folder.ts";

const CONFIG = `server: { port: 9000 }
models:
  - id: "café"
    pricing: { input_per_million: "1", output_per_million: "2" }
    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }
`;

let folder: ConfigTestFolder;

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  await folder.remove();
});

/** Writes `bytes` as `tollgate.yaml` in the folder and answers the load's problems. */
async function problemsOfBytes(bytes: Uint8Array): Promise<string[]> {
  await writeFile(join(folder.path, "tollgate.yaml"), bytes);
  return folder.problemsOf();
}

function utf16(text: string, order: "le" | "be", mark: boolean): Buffer {
  const little = Buffer.from(`${mark ? "\uFEFF" : ""}${text}`, "utf16le");
  return order === "le" ? little : Buffer.from(little.swap16());
}

describe("a config file's encoding", () => {
  it("UTF-8, with or without a byte-order mark, is read as written", async () => {
    await writeFile(join(folder.path, "tollgate.yaml"), CONFIG);
    expect((await folder.load()).models.map((model) => model.id)).toEqual(["café"]);
    await writeFile(join(folder.path, "tollgate.yaml"), `\uFEFF${CONFIG.replaceAll("\n", "\r\n")}`);
    expect((await folder.load()).models.map((model) => model.id)).toEqual(["café"]);
  });

  it("Latin-1 is refused, naming the line and the byte offset of the first byte that is not UTF-8", async () => {
    const problems = await problemsOfBytes(Buffer.from(CONFIG, "latin1"));
    const offset = Buffer.from(CONFIG, "latin1").indexOf(0xe9);
    expect(problems).toEqual([
      `: is not UTF-8: line 3 holds the byte 0xE9 (byte offset ${offset} in the file), which is not UTF-8 there. Was it saved as Latin-1 or Windows-1252? Save it as UTF-8 (in most editors: Save As, Encoding: UTF-8)`,
    ]);
  });

  it("UTF-16 with a byte-order mark is named, in either byte order", async () => {
    expect(await problemsOfBytes(utf16(CONFIG, "le", true))).toEqual([
      ": is UTF-16 (little-endian: it starts with the byte-order mark FF FE), not UTF-8; save it as UTF-8 (in most editors: Save As, Encoding: UTF-8)",
    ]);
    expect(await problemsOfBytes(utf16(CONFIG, "be", true))).toEqual([
      ": is UTF-16 (big-endian: it starts with the byte-order mark FE FF), not UTF-8; save it as UTF-8 (in most editors: Save As, Encoding: UTF-8)",
    ]);
  });

  it("UTF-16 without a byte-order mark is told by its NUL characters", async () => {
    const problems = await problemsOfBytes(utf16(CONFIG.replace("é", "e"), "le", false));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("holds a NUL character on line 1");
    expect(problems[0]).toContain("if it was saved as UTF-16 (without a byte-order mark), save it as UTF-8");
  });

  it("finds the first byte that starts no valid sequence, whatever the kind of fault", () => {
    const offsetOf = (bytes: number[]) => {
      const decoded = decodeConfigText(Uint8Array.from(bytes));
      expect(decoded.ok).toBe(false);
      return decoded.ok ? undefined : /byte offset (\d+)/.exec(decoded.problem)?.[1];
    };
    const a = 0x61;
    expect(offsetOf([a, 0x0a, a, 0xe9])).toBe("3"); // a lead byte at the end
    expect(offsetOf([a, 0x80, a])).toBe("1"); // a lone continuation byte
    expect(offsetOf([a, 0xc0, 0xaf])).toBe("1"); // an overlong form
    expect(offsetOf([a, a, 0xed, 0xa0, 0x80])).toBe("2"); // a surrogate
    expect(offsetOf([0xc3, 0xa9, 0xf4, 0x90, 0x80, 0x80])).toBe("2"); // past U+10FFFF
    expect(offsetOf([0xe2, 0x82, 0xac, 0xe2, 0x82, 0x0a])).toBe("3"); // a sequence cut short
    expect(decodeConfigText(Uint8Array.from([0xf0, 0x9f, 0x98, 0x80]))).toEqual({ ok: true, text: "😀" });
  });
});
