/**
 * The command line as an operator meets it, through real `node src/cli.ts` processes: `--help`
 * wherever it stands prints the usage and exits 0; numbers are digits only (as the PORT variable
 * takes them); no error message repeats a key's secret.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.ts";

let folder: string;
let configFile: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-cli-arguments-"));
  configFile = join(folder, "tollgate.yaml");
  writeFileSync(configFile, "database: sqlite:./tollgate.db\nmodels: []\n");
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function runCliWithConfig(...args: string[]) {
  return runCli([...args, "--config", configFile], { unset: ["TOLLGATE_CONFIG", "PORT", "HOST"] });
}

describe("--help after a command", () => {
  it.each([
    [["serve", "--help"], "Usage: tollgate serve [--config FILE] [--host H] [--port N]"],
    [["serve", "--port", "0", "-h"], "Usage: tollgate serve [--config FILE] [--host H] [--port N]"],
    [["accounts", "create", "--help"], "Usage: tollgate accounts create NAME [--balance AMOUNT]"],
    [["keys", "create", "--help"], "Usage: tollgate keys create --account NAME|ID"],
    [["usage", "--account", "x", "--help"], "Usage: tollgate usage [--account NAME|ID]"],
    [["audit", "--help"], "Usage: tollgate audit"],
    [
      ["models", "make-test", "--help"],
      "Usage: tollgate models make-test FILE [--seed N] [--size tiny|small]",
    ],
    [["models", "pull", "-h"], "Usage: tollgate models pull ID|URI"],
    [["models", "help"], "  tollgate models make-test FILE [--seed N] [--size tiny|small]"],
  ])("%j prints the usage and exits 0", (args, usage) => {
    const { code, stdout, stderr } = runCliWithConfig(...args);
    expect(stderr).toBe("");
    expect(stdout).toContain(usage);
    expect(code).toBe(0);
  });
});

describe("serve options are as strict as the PORT variable", () => {
  it.each([
    ["--port=", '--port must be an integer from 0 to 65535 (got "")'],
    ["--port=0x5DC1", '--port must be an integer from 0 to 65535 (got "0x5DC1")'],
    ["--port= 24002", '--port must be an integer from 0 to 65535 (got " 24002")'],
    ["--port=24002.0", '--port must be an integer from 0 to 65535 (got "24002.0")'],
    ["--port=65536", '--port must be an integer from 0 to 65535 (got "65536")'],
    ["--host=", '--host must be an address or host name such as 127.0.0.1 or 0.0.0.0 (got "")'],
  ])("refuses %s", (option, message) => {
    const { code, stdout, stderr } = runCliWithConfig("serve", option);
    expect(stderr).toBe(`tollgate: ${message}\n`);
    expect(stdout).not.toContain("listening");
    expect(code).toBe(1);
  });
});

describe("models make-test --seed", () => {
  it.each(["", "0x10", "1e3", "-1", "1.5", " 7", "9007199254740992"])(
    "refuses %j: a seed is a whole number in digits",
    (seed) => {
      const file = join(folder, "refused.gguf");
      const { code, stderr } = runCliWithConfig("models", "make-test", file, `--seed=${seed}`);
      expect(stderr).toBe(
        `tollgate: --seed must be a whole number from 0 to 9007199254740991 (got ${JSON.stringify(seed)})\n`,
      );
      expect(code).toBe(1);
      expect(existsSync(file)).toBe(false);
    },
  );

  it("takes 0", () => {
    const { code, stdout } = runCliWithConfig(
      "models",
      "make-test",
      join(folder, "zero.gguf"),
      "--seed",
      "0",
    );
    expect(stdout).toMatch(/^wrote .*zero\.gguf/);
    expect(code).toBe(0);
  });
});

describe("an option before the command", () => {
  it("says it goes after the command, naming the command", () => {
    const { code, stderr } = runCliWithConfig("--port", "9000", "serve");
    expect(stderr).toBe(
      "tollgate: '--port' goes after the command: tollgate serve --port ... (only --config may come before it)\n",
    );
    expect(code).toBe(1);
  });

  it("names the subcommand too, for a command group", () => {
    const { code, stderr } = runCliWithConfig("--account", "acme", "keys", "list");
    expect(stderr).toBe(
      "tollgate: '--account' goes after the command: tollgate keys list --account ... (only --config may come before it)\n",
    );
    expect(code).toBe(1);
  });

  it("names no subcommand for a command that takes none", () => {
    const { stderr } = runCliWithConfig("--since", "2025-01-01", "usage", "extra");
    expect(stderr).toBe(
      "tollgate: '--since' goes after the command: tollgate usage --since ... (only --config may come before it)\n",
    );
  });

  it("is an unknown command when help is asked of one (regression: the usage, and exit 0)", () => {
    const { code, stdout, stderr } = runCliWithConfig("help", "bogus");
    expect(stderr).toContain("unknown command 'bogus'");
    expect(stdout).toBe("");
    expect(code).toBe(1);
    for (const asked of [["help"], ["help", "help"], ["--help", "-h"]]) {
      const usage = runCliWithConfig(...asked);
      expect(usage.code, asked.join(" ")).toBe(0);
      expect(usage.stdout).toContain("Usage: tollgate");
    }
  });

  it("is an unknown command where no command follows", () => {
    const { code, stderr } = runCliWithConfig("--port", "9000");
    expect(stderr).toContain("unknown command '--port'");
    expect(code).toBe(1);
  });
});

describe("error messages never repeat a key's secret", () => {
  const key = `sk-tg-abcdefghijkl-${"S3cret".repeat(7)}x`;

  it.each([
    [[key], "unknown command 'sk-tg-abcdefghijkl-...'"],
    [["usage", key], "Unexpected argument 'sk-tg-abcdefghijkl-...'"],
    [["usage", "--key", key], 'No key has the public id "abcdefghijkl"'],
    [["usage", "--account", key], 'No account has the name or id "sk-tg-abcdefghijkl-..."'],
    [["keys", "list", "--account", key], 'No account has the name or id "sk-tg-abcdefghijkl-..."'],
    [["keys", "revoke", key, "again"], "Unexpected argument 'again'"],
  ])("%j", (args, message) => {
    const { code, stderr } = runCliWithConfig(...args);
    expect(stderr).toContain(message);
    expect(stderr).not.toContain("S3cret");
    expect(code).toBe(1);
  });
});

describe("models list", () => {
  it("never repeats a download URL's user, password or query (a signed URL's secret)", () => {
    const secretConfig = join(folder, "secret-models.yaml");
    writeFileSync(
      secretConfig,
      [
        "database: sqlite:./tollgate.db",
        "models:",
        '  - { id: signed, kind: chat, pricing: { input_per_million: "1", output_per_million: "1" }, engine: { type: llama, model: "https://models.example.com/m/tiny.gguf?X-Amz-Signature=s3cr3tSIG" } }',
        '  - { id: basic, kind: chat, pricing: { input_per_million: "1", output_per_million: "1" }, engine: { type: llama, model: "https://ops:hunter2@models.example.com/m/tiny.gguf" } }',
        '  - { id: hub, kind: chat, pricing: { input_per_million: "1", output_per_million: "1" }, engine: { type: llama, model: "hf:acme/tiny-GGUF:Q4_K_M" } }',
        "",
      ].join("\n"),
    );
    const result = runCli(["models", "list", "--config", secretConfig]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(/s3cr3tSIG|hunter2/);
    expect(result.stdout.split("\n").filter((line) => line !== "")).toEqual([
      "signed\tchat\tllama:https://models.example.com/m/tiny.gguf?…",
      "basic\tchat\tllama:https://models.example.com/m/tiny.gguf",
      "hub\tchat\tllama:hf:acme/tiny-GGUF:Q4_K_M",
    ]);
  });
});
